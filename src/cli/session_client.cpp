// tessera CMD --session PATH @NAME: the command's workflow run by an
// analyst's session (python/tessera/session) on a graph it holds, instead of
// reading the graph again. The options parsed here travel as JSON
// (pipeline::options_json); the session's ranks run the same workflow on the
// resident graph (its caller's-graph form) and send back the document;
// progress lines arrive while it runs. The wire is the session's: frames of
// two big-endian 64-bit lengths, a JSON header, a payload. The client checks
// its server first (the socket's peer must be this user: SO_PEERCRED) and
// refuses a frame past its limits before allocating anything for it
// (docs/security.md).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera::cli {

namespace {

// python/tessera/session/protocol.py's PROTOCOL_VERSION: a session of another
// version refuses this client at hello.
constexpr int kSessionProtocolVersion = 2;
constexpr std::uint64_t kMaxHeaderBytes = 16 << 20;
// No reply of the commands sent here carries an array: a payload announced
// past this is not a session's, refused before reading it.
constexpr std::uint64_t kMaxPayloadBytes = 1 << 20;

class SessionConnection {
 public:
  explicit SessionConnection(const std::string& path) : path_(path) {
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path)) throw ConfigError("--session " + path + ": the path is too long");
    fd_ = FileDescriptor(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd_) throw SystemError("cannot make a socket for --session", errno);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      throw SystemError("cannot connect to the session at " + path + " (is `tessera serve` running there?)", errno);
    // Only a session of this user is told anything (its uid as the kernel
    // recorded it at connect).
    ucred peer{};
    socklen_t size = sizeof(peer);
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0)
      throw SystemError("cannot check who serves " + path, errno);
    if (peer.uid != ::getuid())
      throw PeerError("the socket " + path + " is served by uid " + std::to_string(peer.uid) + ", not by you (uid " +
                      std::to_string(::getuid()) + "): not your session; nothing was sent to it");
  }

  void send(const nlohmann::json& header) {
    const std::string text = header.dump();
    std::array<unsigned char, 16> lengths{};
    for (int i = 0; i < 8; ++i) lengths[static_cast<std::size_t>(7 - i)] = static_cast<unsigned char>(text.size() >> (8 * i));
    write_all(lengths.data(), lengths.size());
    write_all(text.data(), text.size());
  }

  nlohmann::json receive() {
    std::array<unsigned char, 16> lengths{};
    read_all(lengths.data(), lengths.size());
    std::uint64_t head = 0, payload = 0;
    for (int i = 0; i < 8; ++i) {
      head = head << 8 | lengths[static_cast<std::size_t>(i)];
      payload = payload << 8 | lengths[static_cast<std::size_t>(8 + i)];
    }
    if (head > kMaxHeaderBytes) throw FormatError("the session at " + path_ + " sent a frame of " + std::to_string(head) + " bytes");
    if (payload > kMaxPayloadBytes)
      throw FormatError("the session at " + path_ + " announced a payload of " + std::to_string(payload) +
                        " bytes, more than the " + std::to_string(kMaxPayloadBytes) + " a command's reply may carry");
    std::string text(head, '\0');
    read_all(text.data(), text.size());
    std::array<char, 4096> skipped{};  // no command here returns an array: read and dropped
    for (std::uint64_t left = payload; left > 0;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, skipped.size()));
      read_all(skipped.data(), n);
      left -= n;
    }
    try {
      return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw FormatError("the session at " + path_ + " sent a frame that is not JSON: " + e.what());
    }
  }

 private:
  void write_all(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t k = ::send(fd_.get(), p, n, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) throw PeerError("the session at " + path_ + " closed the connection");
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  void read_all(void* data, std::size_t n) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      ssize_t k = ::recv(fd_.get(), p, n, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) throw PeerError("the session at " + path_ + " ended before answering (did a rank die?)");
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  std::string path_;
  FileDescriptor fd_;
};

// The session's error as the exception a direct run would throw (an MPI
// or system error, whose code stays in the session, as a plain Error).
[[noreturn]] void rethrow(const nlohmann::json& error) {
  auto text = [&](const char* key, const char* otherwise) {
    return error.contains(key) && error[key].is_string() ? error[key].get<std::string>() : std::string(otherwise);
  };
  const std::string type = text("type", "Error");
  const std::string message = text("message", "the session reported an error");
  if (type == "ConfigError") throw ConfigError(message);
  if (type == "FormatError") throw FormatError(message);
  if (type == "RangeError") throw RangeError(message);
  if (type == "MismatchError") throw MismatchError(message);
  if (type == "PeerError") throw PeerError(message);
  if (type == "Cancelled") throw Cancelled(message);  // another client's cancel(), or the session stopping
  throw Error(message);
}

nlohmann::json answer(SessionConnection& c, bool quiet) {
  for (;;) {
    auto reply = c.receive();
    if (!reply.is_object()) throw FormatError("the session sent a reply that is not a JSON object");
    if (reply.contains("progress") && !reply.contains("ok")) {
      if (!quiet && reply["progress"].is_string())
        std::fprintf(stderr, "%s\n", reply["progress"].get<std::string>().c_str());
      continue;
    }
    if (!reply.value("ok", false)) {
      const auto error = reply.value("error", nlohmann::json::object());
      rethrow(error.is_object() ? error : nlohmann::json::object());
    }
    const auto result = reply.value("result", nlohmann::json::object());
    if (!result.is_object()) throw FormatError("the session sent a result that is not a JSON object");
    return result;
  }
}

// The session's ranks write outputs from their own working directory.
void absolute(std::string& path, const char* option) {
  if (path.empty()) return;
  if (path == "-" || path == "/dev/stdout")
    throw ConfigError(std::string(option) + " " + path + ": with --session the session's ranks write the outputs; "
                      "name a file");
  path = std::filesystem::absolute(path).string();
}

}  // namespace

int run_in_session(const GraphArgs& args) {
  const std::string& graph = args.o.input.path;
  if (!names_resident_graph(graph))
    throw ConfigError("--session runs on a graph the session holds: name it @NAME (s.persist(g, \"NAME\") in "
                      "Python), not " + (graph.empty() ? std::string("a generated graph") : graph));
  if (launched_by_mpi())
    throw ConfigError("--session runs the command in the session's own ranks: leave out -n (and mpirun)");
  pipeline::Options o = args.o;
  o.analysis.quiet = args.quiet;
  o.document_on_stdout = args.json;
  for (auto [path, option] : {std::pair{&o.output, "-o"}, {&o.ids_output, "--ids"}, {&o.bfs.subgraph, "--subgraph"},
                              {&o.bfs.subgraph_ids, "--subgraph-ids"}, {&o.spectral.parts, "--parts"}})
    absolute(*path, option);
  SessionConnection c(args.session);
  c.send({{"op", "hello"}, {"args", nlohmann::json::object()}, {"version", kSessionProtocolVersion}});
  answer(c, true);
  c.send({{"op", "command"},
          {"args", {{"graph", graph.substr(1)}, {"name", args.command}, {"options", pipeline::options_json(o)},
                    {"verbose", !args.quiet}}}});
  auto result = answer(c, args.quiet);
  if (args.json) std::printf("%s\n", result.value("document", nlohmann::json::object()).dump().c_str());
  return result.value("exit_code", 0);
}

}  // namespace tessera::cli
