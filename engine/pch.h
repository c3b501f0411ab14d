// Precompiled header for engine and bindings: ATen is the costly include
// (about 6 s a translation unit here), so it is parsed once.
#pragma once
#include <ATen/ATen.h>
