// Graph input and output: read.hpp (text readers, the binary loader) and
// write.hpp (text and binary writers).
#pragma once
#include "tessera/graph/read.hpp"
#include "tessera/graph/write.hpp"
