// Tensors over a file's own bytes, for weights used where they lie
// (lua/accel/big_modeling): the mapping is private and copy-on-write, so
// writing such a tensor (fine-tuning a loaded model) copies the pages it
// writes and never touches the file. Loading costs nothing; the first read of
// a page brings it from the page cache or the disk (with the kernel's
// read-ahead), and the process's memory grows by the pages a forward
// touches, which the kernel may drop and read back under memory pressure.
//
// Note [weights lost under a mapping]: a file that another process truncates
// (or rewrites in place, as opening it for writing does) while it is mapped
// loses the pages past its new end, and the next read of one raises SIGBUS,
// which ends the process far from any load. The first mapping installs a
// SIGBUS handler that names the file on stderr before the process ends with
// that signal (which the launcher then reports); a SIGBUS elsewhere goes to
// whatever handled it before.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace accel::formats {

class FileReader;

// `shape` elements of `dtype` at byte `offset` of `file`. The file must still
// hold them now (else an error naming it and `what`) and `offset` must be a
// multiple of the element size (checked). The tensor keeps its mapping alive
// after `file` is closed.
at::Tensor map_tensor(const FileReader& file, uint64_t offset, at::IntArrayRef shape, at::ScalarType dtype,
                      const std::string& what);

}  // namespace accel::formats
