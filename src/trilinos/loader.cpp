// The trilinos/ layer as programs link it: each entry point forwards to
// libtessera-trilinos.so (plugin.hpp), opened on first use from the
// directory of libtessera.so, where both are built and installed. A
// process that never analyses never loads Trilinos.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>

#include "plugin.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::trilinos {

namespace {

// Where the plugin should be: beside libtessera.so (the build tree, or the
// installed lib directory); else the loader's own search (LD_LIBRARY_PATH).
std::string plugin_path() {
  if (void* self = ::dlopen(TESSERA_LIBRARY_SONAME, RTLD_LAZY | RTLD_NOLOAD)) {
    link_map* map = nullptr;
    std::string dir;
    if (::dlinfo(self, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
      dir = std::filesystem::path(map->l_name).parent_path().string();
    ::dlclose(self);
    if (!dir.empty() && std::filesystem::exists(dir + "/" + plugin::kFileName)) return dir + "/" + plugin::kFileName;
  }
  return plugin::kFileName;
}

std::atomic<const plugin::EntryPoints*> loaded{nullptr};

const plugin::EntryPoints& entry() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string path = plugin_path();
    // RTLD_LOCAL: Trilinos' symbols stay the plugin's; the plugin is linked
    // -Bsymbolic, so its own calls never reach this loader's namesakes.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw ConfigError("cannot load the trilinos/ layer (" + path + "): " + ::dlerror() +
                        "; it is built and installed beside libtessera.so");
    auto get = reinterpret_cast<const plugin::EntryPoints* (*)()>(::dlsym(handle, plugin::kEntrySymbol));
    const plugin::EntryPoints* e = get ? get() : nullptr;
    if (!e || e->version != plugin::kVersion)
      throw ConfigError(path + " is not this Tessera's trilinos/ layer (" +
                        (e ? "entry points version " + std::to_string(e->version) + ", expected " +
                                 std::to_string(plugin::kVersion)
                           : std::string("no ") + plugin::kEntrySymbol) +
                        "): rebuild Tessera");
    loaded = e;  // never unloaded: Trilinos' static state lives to the process's end
  });
  return *loaded.load();
}

}  // namespace

// Built with Trilinos: available where the plugin is, without loading it
// (asked for defaults by commands that may not analyse at all).
bool available() noexcept {
  try {
    return loaded.load() || std::filesystem::exists(plugin_path());
  } catch (...) {
    return false;
  }
}

std::string description() { return entry().description(); }

struct Session::State {
  void* session = nullptr;
};

Session::Session(Runtime& rt) : state_(std::make_unique<State>()) { state_->session = entry().open_session(rt); }

Session::~Session() {
  if (state_ && state_->session) entry().close_session(state_->session);
}

bool Session::active() noexcept {
  const plugin::EntryPoints* e = loaded.load();
  return e && e->session_active();
}

RowMatrixMemory row_matrix_memory(const graph::EdgeList& g) { return entry().row_matrix_memory(g); }

SpectralResult spectral(const graph::EdgeList& g, const SpectralOptions& options) {
  return entry().spectral(g, options);
}

BelosHittingTimes belos_hitting_times(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options) {
  return entry().belos_hitting_times(g, targets, options);
}

SpectralResult spectral(const graph::PackedGraph& g, const SpectralOptions& options) {
  return entry().spectral_packed(g, options);
}

BelosHittingTimes belos_hitting_times(const graph::PackedGraph& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options) {
  return entry().belos_hitting_times_packed(g, targets, options);
}

}  // namespace tessera::trilinos
