// Named points where a test can make the process die as a crash would, to
// show what a crash at that moment leaves behind. Set
//
//   ACCEL_FAULT_INJECT=<point>[@<n>][,<point>[@<n>]...]
//
// and the n-th time (default: the first) the process reaches <point> it
// sends itself SIGKILL: no destructor, flush or atexit handler runs. Points:
//
//   checkpoint-before-manifest   the main process, during a checkpoint save,
//                                after every data file is written and before
//                                the manifest is
//   checkpoint-before-commit     after the manifest, before the temporary
//                                folder is renamed into place
//   checkpoint-async-write       the background writer of an asynchronous
//                                save, after each of its steps (a file
//                                written, the manifest, the rename)
//   shared-memory-created        rank 0, after it created the all-reduce
//                                segment and before the other ranks opened
//                                it (its name is still in /dev/shm)
//
// Without the variable a point costs one getenv.
#pragma once

namespace accel::formats {

void fault_point(const char* point);

}  // namespace accel::formats
