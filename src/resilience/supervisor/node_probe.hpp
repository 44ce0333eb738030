// Node probe (internal): whether a host answers mpirun's own launcher.
#pragma once
#include <string>

namespace tessera::resilience::supervisor {

// Whether `host` answers `LAUNCHER host true` within `timeout` seconds
// (LAUNCHER: Open MPI's plm_rsh_agent, ssh or rsh); `how` says what
// happened when it does not.
bool host_answers(const std::string& host, double timeout, std::string& how);

}  // namespace tessera::resilience::supervisor
