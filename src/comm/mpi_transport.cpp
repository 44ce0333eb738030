#include "tessera/comm/mpi_transport.hpp"
#include "tessera/runtime/wait.hpp"

#include <algorithm>

#include "tessera/runtime/error.hpp"

namespace tessera::comm {

namespace {
// Distinct from every other tag on the exchange's own communicator.
int tag_of(Channel c) { return 1 + static_cast<int>(c); }
}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, Config config) : comm_(comm), config_(config) {
  int size = 1;
  TESSERA_MPI(MPI_Comm_size(comm_, &size));
  for (int c = 0; c < kChannels; ++c) {
    if (config_.per_destination[static_cast<std::size_t>(c)] > 0)
      pools_[static_cast<std::size_t>(c)].resize(static_cast<std::size_t>(size));
    if (config_.bytes[static_cast<std::size_t>(c)] == 0) continue;
    for (std::size_t k = 0; k < config_.receives[static_cast<std::size_t>(c)]; ++k)
      receives_.push_back({std::vector<std::byte>(config_.bytes[static_cast<std::size_t>(c)]), static_cast<Channel>(c)});
  }
  recv_reqs_.assign(receives_.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < receives_.size(); ++i) post(i);
}

MpiTransport::~MpiTransport() {
  for (auto& r : recv_reqs_) {
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
}

void MpiTransport::post(std::size_t i) {
  Receive& r = receives_[i];
  TESSERA_MPI(MPI_Irecv(r.data.data(), static_cast<int>(r.data.size()), MPI_BYTE, MPI_ANY_SOURCE, tag_of(r.channel),
                        comm_, &recv_reqs_[i]));
}

std::size_t MpiTransport::memory_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& s : sends_) total += s.data.capacity();
  for (const auto& r : receives_) total += r.data.capacity();
  return total;
}

Outbox MpiTransport::acquire(int dest, Channel channel) {
  const auto c = static_cast<std::size_t>(channel);
  const int limit = config_.per_destination[c];
  std::uint32_t id = 0;
  if (limit > 0) {
    std::vector<std::uint32_t>& pool = pools_[c][static_cast<std::size_t>(dest)];
    auto it = std::find_if(pool.begin(), pool.end(), [&](std::uint32_t k) { return sends_[k].free(); });
    if (it != pool.end()) {
      id = *it;
    } else if (pool.size() < static_cast<std::size_t>(limit)) {
      id = static_cast<std::uint32_t>(sends_.size());
      pool.push_back(id);
    } else {
      return {};  // every buffer towards dest is in use
    }
  } else if (!shared_free_[c].empty()) {
    id = shared_free_[c].back();
    shared_free_[c].pop_back();
  } else {
    id = static_cast<std::uint32_t>(sends_.size());
  }
  if (id == sends_.size()) {
    sends_.push_back({std::vector<std::byte>(config_.bytes[c]), false, false, false, static_cast<int>(c)});
    send_reqs_.push_back(MPI_REQUEST_NULL);
  }
  sends_[id].filling = true;
  return {sends_[id].data.data(), id};
}

void MpiTransport::send(int dest, Channel channel, Outbox box, std::size_t bytes, bool keep) {
  SendBuffer& s = sends_[box.id];
  TESSERA_MPI(MPI_Isend(s.data.data(), static_cast<int>(bytes), MPI_BYTE, dest, tag_of(channel), comm_,
                        &send_reqs_[box.id]));
  s.filling = false;
  s.sending = true;
  s.kept = keep;
  ++sending_;
}

void MpiTransport::retire(std::uint32_t id) {
  SendBuffer& s = sends_[id];
  if (s.free() && config_.per_destination[static_cast<std::size_t>(s.channel)] == 0)
    shared_free_[static_cast<std::size_t>(s.channel)].push_back(id);
}

void MpiTransport::give_back(Outbox box) {
  sends_[box.id].kept = false;
  retire(box.id);
}

bool MpiTransport::poll(Receiver& receiver) {
  bool did = false;
  int n = 0;
  completed_.resize(std::max(recv_reqs_.size(), send_reqs_.size()));
  statuses_.resize(completed_.size());
  {
    MpiPollScope quiet;
    TESSERA_MPI(MPI_Testsome(static_cast<int>(recv_reqs_.size()), recv_reqs_.data(), &n, completed_.data(),
                             statuses_.data()));
  }
  if (n != MPI_UNDEFINED && n > 0) {
    // Copied first: the receiver's handlers may serve, polling this transport again.
    const std::size_t base = done_.size();
    for (int k = 0; k < n; ++k) {
      const MPI_Status& st = statuses_[static_cast<std::size_t>(k)];
      Done d{static_cast<std::size_t>(completed_[static_cast<std::size_t>(k)]), st.MPI_SOURCE, 0};
      TESSERA_MPI(MPI_Get_count(&st, MPI_BYTE, &d.bytes));
      done_.push_back(d);
    }
    did = true;
    for (std::size_t k = base; k < base + static_cast<std::size_t>(n); ++k) {
      const Done d = done_[k];
      Arrival a{this, d.source, receives_[d.i].channel,
                {receives_[d.i].data.data(), static_cast<std::size_t>(d.bytes)}, static_cast<std::uint32_t>(d.i)};
      if (receiver.arrived(a)) post(d.i);
    }
    done_.resize(base);
  }
  if (sending_ > 0) {
    completed_.resize(send_reqs_.size());  // the receiver may have sent (replies)
    {
      MpiPollScope quiet;
      TESSERA_MPI(MPI_Testsome(static_cast<int>(send_reqs_.size()), send_reqs_.data(), &n, completed_.data(),
                               MPI_STATUSES_IGNORE));
    }
    for (int k = 0; k < n && n != MPI_UNDEFINED; ++k) {
      auto id = static_cast<std::uint32_t>(completed_[static_cast<std::size_t>(k)]);
      sends_[id].sending = false;
      --sending_;
      retire(id);
      did = true;
    }
  }
  return did;
}

void MpiTransport::release(const Arrival& arrival) { post(arrival.id); }

}  // namespace tessera::comm
