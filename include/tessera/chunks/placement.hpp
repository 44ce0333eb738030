// Where each chunk lives: placement[chunk id] = rank.
#pragma once
#include <vector>

namespace tessera::chunks { using Placement = std::vector<int>; }
