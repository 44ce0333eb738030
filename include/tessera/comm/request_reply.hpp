// Requests routed to their owner ranks in bulk, answered there, the replies
// returned in request order: the "bucket by owner, send, answer" step of a
// bulk-synchronous code, once (UPC++'s rpc over a whole batch; a Tpetra
// Import set up from the ids a rank reads).
//
//   request_reply(comm, requests, owner_of, answer)  the reply to each request, in request order
//   deliver(comm, records, owner_of)                  send only: what every rank sent here
//                                                     (both take a span, or a vector moved in
//                                                     and freed as soon as it is sent)
//   RequestPlan<Req>(comm, requests, owner_of)        the routing kept: replies of any type as
//                                                     often as needed, values sent either way
//   AlltoallPlan(comm, counts)                        the counts of one all-to-all pattern,
//                                                     checked, usable in both directions
//
// Collective over `comm` (the runtime's communicator): every rank calls the
// same form, with its own requests, none included. `owner_of(request)` names
// the rank in [0, P) a request goes to; it is called once or twice per
// request (no array of owners is kept), so it must be a pure function.
// `answer(request)` runs on the owner, once per received request. Requests,
// replies and records are trivially copyable. Counts travel with one
// MPI_Alltoall (beside it, in flight at the same time, one MPI_Allreduce of
// every rank's receive total, so every rank knows whether any would fail),
// payloads with one MPI_Alltoallv per direction; every wait yields the core
// (runtime/wait.hpp).
//
// Requests already grouped by owner (owners non-decreasing, as sorted ids
// under a block split are) travel straight from the caller's span and need no
// permutation back; others are bucketed into one copy first.
//
// Errors, thrown on every rank together before any payload moves: an owner
// outside [0, P) (RangeError naming the request), or a rank sending or
// receiving more than INT_MAX records in one exchange (ConfigError: MPI's
// counts are ints). A reply or value span of the wrong length is a
// programming error: MismatchError on the rank that passed it, before any
// communication.
//
// Memory per rank for n requests sent and m received: a plan keeps the m
// received requests (take_received() hands them over), 8n bytes of positions
// unless the requests were grouped, and O(P) counts. request_reply on
// ungrouped requests: while sending, a bucket copy (n) and the positions (n)
// beside the m received; while replying, the positions, the m answers (in
// place of the requests when the reply type is the request type) and 2n
// replies (they arrive in bucket order and are put back in request order).
// Grouped: no copy, no positions, the replies arrive in place. deliver: the
// m received beside the records (and a bucket copy, except in the in-place
// form). The vector forms free the caller's records once they are sent.
#pragma once
#include <mpi.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::comm {

namespace detail {
// MismatchError unless a span of `what` holds `want` elements.
void check_length(const char* what, std::size_t got, std::uint64_t want);
}  // namespace detail

// How many records each rank sends to each other in one all-to-all pattern,
// exchanged once: forward() sends along it, backward() the reverse way (the
// replies), as often as needed. A default-constructed plan moves nothing.
class AlltoallPlan {
 public:
  AlltoallPlan() = default;
  // Collective. counts[r]: records this rank sends to rank r, one count per
  // rank of `comm`. `problem`: an error this rank found in its arguments
  // before the exchange; it is thrown here on every rank together (the
  // others get an error of the same category naming this rank), as is a
  // wrong number of counts or a total beyond MPI's int counts.
  AlltoallPlan(MPI_Comm comm, std::span<const std::uint64_t> counts, std::exception_ptr problem = nullptr);

  MPI_Comm comm() const noexcept { return comm_; }
  int ranks() const noexcept { return static_cast<int>(send_counts_.size()); }
  std::uint64_t sent() const noexcept { return sent_; }
  std::uint64_t received() const noexcept { return received_; }
  std::uint64_t received_from(int rank) const {
    return static_cast<std::uint64_t>(recv_counts_.at(static_cast<std::size_t>(rank)));
  }

  // Collective. `send`: sent() records of `record_bytes`, grouped by
  // destination rank; `recv`: room for received() records, which arrive
  // grouped by source rank (rank order), each source's in its order.
  void forward_bytes(const void* send, void* recv, std::size_t record_bytes) const;
  // Collective. The reverse pattern: received() records (grouped by the rank
  // they came from) go back there; sent() records arrive grouped as sent.
  void backward_bytes(const void* send, void* recv, std::size_t record_bytes) const;

  template <class T>
  void forward(std::span<const std::type_identity_t<T>> send, std::span<T> recv) const {
    static_assert(std::is_trivially_copyable_v<T>);
    detail::check_length("records to send", send.size(), sent_);
    detail::check_length("slots to receive into", recv.size(), received_);
    forward_bytes(send.data(), recv.data(), sizeof(T));
  }
  template <class T>
  void backward(std::span<const std::type_identity_t<T>> send, std::span<T> recv) const {
    static_assert(std::is_trivially_copyable_v<T>);
    detail::check_length("records to send back", send.size(), received_);
    detail::check_length("slots to receive into", recv.size(), sent_);
    backward_bytes(send.data(), recv.data(), sizeof(T));
  }

  std::size_t memory_bytes() const noexcept { return 4 * send_counts_.capacity() * sizeof(int); }

 private:
  void exchange(const void* send, const std::vector<int>& send_counts, const std::vector<int>& send_displs,
                void* recv, const std::vector<int>& recv_counts, const std::vector<int>& recv_displs,
                std::size_t record_bytes) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
  std::uint64_t sent_ = 0, received_ = 0;
};

template <class F, class T>
concept OwnerFunction =
    std::invocable<F&, const T&> && std::convertible_to<std::invoke_result_t<F&, const T&>, long long>;

namespace detail {

// One pass over the requests: how many go to each rank, whether they are
// already grouped by owner, the first owner out of range.
struct OwnerCounts {
  std::vector<std::uint64_t> counts;
  bool grouped = true;
  std::exception_ptr problem;
};

// The RangeError for request `position` naming `owner` outside [0, ranks).
std::exception_ptr owner_out_of_range(std::size_t position, long long owner, int ranks);

// Where each rank's group starts in a buffer grouped by owner.
std::vector<std::uint64_t> group_starts(std::span<const std::uint64_t> counts);

template <class T, class OwnerOf>
OwnerCounts count_owners(MPI_Comm comm, std::span<const T> items, OwnerOf& owner_of) {
  const int ranks = tessera::detail::comm_size(comm);
  OwnerCounts out;
  out.counts.assign(static_cast<std::size_t>(ranks), 0);
  long long last = 0;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const auto o = static_cast<long long>(owner_of(items[k]));
    if (o < 0 || o >= ranks) {
      if (!out.problem) out.problem = owner_out_of_range(k, o, ranks);
      continue;
    }
    out.grouped = out.grouped && o >= last;
    last = o;
    ++out.counts[static_cast<std::size_t>(o)];
  }
  return out;
}

template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace detail

// The routing of one batch of requests: where each went, what every rank
// asked of this one. Replies (any trivially copyable type) go back in request
// order, values go forward to the owners, as often as needed; the requests
// are sent once.
template <class Req>
class RequestPlan {
  static_assert(std::is_trivially_copyable_v<Req>, "requests travel as bytes");

 public:
  RequestPlan() = default;  // moves nothing
  // Collective: sends requests[k] to rank owner_of(requests[k]).
  template <OwnerFunction<Req> OwnerOf>
  RequestPlan(MPI_Comm comm, std::span<const Req> requests, OwnerOf&& owner_of) {
    detail::OwnerCounts g = detail::count_owners(comm, requests, owner_of);
    pattern_ = AlltoallPlan(comm, g.counts, g.problem);
    received_.resize(pattern_.received());
    if (g.grouped) {
      pattern_.forward<Req>(requests, received_);
      return;
    }
    std::vector<Req> bucketed(requests.size());
    position_.resize(requests.size());
    std::vector<std::uint64_t> next = detail::group_starts(g.counts);
    for (std::size_t k = 0; k < requests.size(); ++k) {
      position_[k] = next[static_cast<std::size_t>(owner_of(requests[k]))]++;
      bucketed[position_[k]] = requests[k];
    }
    pattern_.forward<Req>(bucketed, received_);
  }

  std::size_t requests() const noexcept { return pattern_.sent(); }
  // Every rank's requests to this one: grouped by source rank in rank order,
  // each source's in its request order. Empty after take_received().
  std::span<const Req> received() const noexcept { return received_; }
  // Hands the received requests over (to answer in place, or to keep in
  // another form); the plan still replies and sends.
  std::vector<Req> take_received() { return std::exchange(received_, {}); }
  const AlltoallPlan& pattern() const noexcept { return pattern_; }

  // Collective. answers[j] answers the j-th received request (one per
  // request received, in received() order); out[k] gets the answer to
  // request k.
  template <class Rep>
  void reply(std::span<const std::type_identity_t<Rep>> answers, std::span<Rep> out) const {
    static_assert(std::is_trivially_copyable_v<Rep>, "replies travel as bytes");
    if (pattern_.comm() == MPI_COMM_NULL) return;
    if (position_.empty()) return pattern_.backward<Rep>(answers, out);
    detail::check_length("reply slots", out.size(), position_.size());
    std::vector<Rep> arrived(position_.size());
    pattern_.backward<Rep>(answers, arrived);
    for (std::size_t k = 0; k < position_.size(); ++k) out[k] = arrived[position_[k]];
  }
  template <class Rep>
  std::vector<Rep> reply(std::span<const Rep> answers) const {
    std::vector<Rep> out(requests());
    reply<Rep>(answers, out);
    return out;
  }

  // Collective, the other way: values[k] goes to request k's owner, which
  // gets it at out[j] for its j-th received request.
  template <class T>
  void send(std::span<const std::type_identity_t<T>> values, std::span<T> out) const {
    static_assert(std::is_trivially_copyable_v<T>, "values travel as bytes");
    if (pattern_.comm() == MPI_COMM_NULL) return;
    if (position_.empty()) return pattern_.forward<T>(values, out);
    detail::check_length("values", values.size(), position_.size());
    std::vector<T> bucketed(values.size());
    for (std::size_t k = 0; k < values.size(); ++k) bucketed[position_[k]] = values[k];
    pattern_.forward<T>(bucketed, out);
  }

  std::size_t memory_bytes() const noexcept {
    return pattern_.memory_bytes() + position_.capacity() * sizeof(std::uint64_t) + received_.capacity() * sizeof(Req);
  }

 private:
  AlltoallPlan pattern_;
  std::vector<std::uint64_t> position_;  // request k travelled at position_[k]; empty: in request order
  std::vector<Req> received_;
};

namespace detail {

// Answers what `plan` received (in place when replies are requests) and
// returns the replies in request order.
template <class Req, class Answer>
auto answer_and_reply(RequestPlan<Req>& plan, Answer& answer) {
  using Rep = std::remove_cvref_t<std::invoke_result_t<Answer&, const Req&>>;
  static_assert(std::is_trivially_copyable_v<Rep>, "replies travel as bytes");
  std::vector<Req> asked = plan.take_received();
  std::vector<Rep> out;
  if constexpr (std::is_same_v<Rep, Req>) {
    for (auto& r : asked) r = answer(std::as_const(r));  // no second array
    out.resize(plan.requests());
    plan.template reply<Rep>(asked, out);
  } else {
    std::vector<Rep> answers(asked.size());
    for (std::size_t j = 0; j < asked.size(); ++j) answers[j] = answer(std::as_const(asked[j]));
    release(asked);
    out.resize(plan.requests());
    plan.template reply<Rep>(answers, out);
  }
  return out;
}

}  // namespace detail

// Collective. The answer to each of this rank's requests, in request order:
// out[k] = answer(requests[k]) run on rank owner_of(requests[k]).
template <class Req, OwnerFunction<Req> OwnerOf, class Answer>
  requires std::invocable<Answer&, const Req&>
auto request_reply(MPI_Comm comm, std::span<const Req> requests, OwnerOf&& owner_of, Answer&& answer) {
  RequestPlan<Req> plan(comm, requests, owner_of);
  return detail::answer_and_reply(plan, answer);
}

// The same, freeing `requests` once they are sent (before the replies are
// allocated).
template <class Req, OwnerFunction<Req> OwnerOf, class Answer>
  requires std::invocable<Answer&, const Req&>
auto request_reply(MPI_Comm comm, std::vector<Req>&& requests, OwnerOf&& owner_of, Answer&& answer) {
  RequestPlan<Req> plan(comm, std::span<const Req>(requests), owner_of);
  detail::release(requests);
  return detail::answer_and_reply(plan, answer);
}

// Collective, send only: records[k] goes to rank owner_of(records[k]).
// Returns every rank's records to this one, grouped by source rank in rank
// order, each source's in its order.
template <class T, OwnerFunction<T> OwnerOf>
std::vector<T> deliver(MPI_Comm comm, std::span<const T> records, OwnerOf&& owner_of) {
  static_assert(std::is_trivially_copyable_v<T>, "records travel as bytes");
  detail::OwnerCounts g = detail::count_owners(comm, records, owner_of);
  AlltoallPlan pattern(comm, g.counts, g.problem);
  std::vector<T> out(pattern.received());
  if (g.grouped) {
    pattern.forward<T>(records, out);
    return out;
  }
  std::vector<T> bucketed(records.size());
  std::vector<std::uint64_t> next = detail::group_starts(g.counts);
  for (const T& r : records) bucketed[next[static_cast<std::size_t>(owner_of(r))]++] = r;
  pattern.forward<T>(bucketed, out);
  return out;
}

// The same, grouping `records` in place (American flag sort: no bucket
// copy, O(P) extra) and freeing them before returning. Within one source
// the order is not kept.
template <class T, OwnerFunction<T> OwnerOf>
std::vector<T> deliver(MPI_Comm comm, std::vector<T>&& records, OwnerOf&& owner_of) {
  static_assert(std::is_trivially_copyable_v<T>, "records travel as bytes");
  detail::OwnerCounts g = detail::count_owners(comm, std::span<const T>(records), owner_of);
  AlltoallPlan pattern(comm, g.counts, g.problem);
  if (pattern.ranks() == 1) return std::exchange(records, {});
  if (!g.grouped) {
    std::vector<std::uint64_t> next = detail::group_starts(g.counts), end(next.size());
    for (std::size_t r = 0; r < next.size(); ++r) end[r] = next[r] + g.counts[r];
    for (std::size_t r = 0; r < next.size(); ++r)
      while (next[r] < end[r]) {
        const auto o = static_cast<std::size_t>(owner_of(std::as_const(records[next[r]])));
        if (o == r)
          ++next[r];
        else
          std::swap(records[next[r]], records[next[o]++]);
      }
  }
  std::vector<T> out(pattern.received());
  pattern.forward<T>(records, out);
  detail::release(records);
  return out;
}

}  // namespace tessera::comm
