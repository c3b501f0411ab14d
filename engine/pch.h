// Precompiled header for engine and bindings: ATen is the costly include
// (about 6 s a translation unit here), so it is parsed once.
#pragma once
#include <ATen/ATen.h>

#include "engine/compat.h"  // what 1.13 and 2.x spell differently
