// WeightsReader::map: tensors used where they lie in a safetensors file,
// privately (writing one never writes the file), and a file truncated under
// a mapping named before the process ends (Note [weights lost under a
// mapping], engine/formats/mapped_tensor.h).
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "engine/formats/format_error.h"
#include "engine/formats/weights_export.h"
#include "engine/formats/weights_reader.h"
#include "tests/engine/scratch_files.h"

using namespace accel::formats;
using accel::testing::TempDir;

namespace {

// Above WeightsReader::kMapMinBytes, so it is mapped rather than read.
constexpr int64_t kBig = 400 * 1024;  // floats: 1.6 MB

bool process_maps(const std::string& path) {
  return accel::testing::slurp("/proc/self/maps").find(path) != std::string::npos;
}

}  // namespace

TEST_CASE("a large tensor is mapped from its file and unmapped when it dies; small ones are read") {
  TempDir dir;
  const std::string path = dir.path + "/w.safetensors";
  at::Tensor big = at::randn({kBig / 4, 4});
  at::Tensor small = at::randn({3, 5});
  write_safetensors(path, {{"big", big}, {"small", small}});
  {
    at::Tensor mapped;
    {
      WeightsReader reader(path);
      at::Tensor small_read = reader.map("small");
      CHECK(at::equal(small_read, small));
      CHECK_FALSE(process_maps(path));
      mapped = reader.map("big");
    }
    // The reader is gone; the mapping lives as long as the tensor.
    CHECK(process_maps(path));
    CHECK(at::equal(mapped, big));
    // Copy on write: the tensor changes, the file does not.
    mapped.add_(1);
    CHECK(at::equal(mapped, big + 1));
  }
  CHECK_FALSE(process_maps(path));
  WeightsReader again(path);
  CHECK(at::equal(again.map("big"), big));
  // A conversion reads and converts instead.
  at::Tensor half = again.map("big", at::kHalf);
  CHECK(half.scalar_type() == at::kHalf);
  CHECK(at::equal(half, big.to(at::kHalf)));
}

TEST_CASE("mapping a tensor that a shrunk file no longer holds is an error naming both") {
  TempDir dir;
  const std::string path = dir.path + "/w.safetensors";
  write_safetensors(path, {{"a", at::ones({kBig})}, {"b", at::ones({kBig})}});
  WeightsReader reader(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  CHECK(at::equal(reader.map("a"), at::ones({kBig})));
  CHECK_THROWS_WITH(reader.map("b"), Catch::Contains("w.safetensors") && Catch::Contains("tensor 'b'") &&
                                         Catch::Contains("truncated"));
}

TEST_CASE("a file truncated under a mapped tensor ends the process with SIGBUS after naming the file") {
  TempDir dir;
  const std::string path = dir.path + "/w.safetensors";
  write_safetensors(path, {{"a", at::ones({kBig})}});
  int err[2];
  REQUIRE(::pipe(err) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // No LibTorch kernel runs in the child (its thread pool does not
    // survive fork): the mapped bytes are read directly.
    ::dup2(err[1], STDERR_FILENO);
    WeightsReader reader(path);
    at::Tensor a = reader.map("a");
    std::filesystem::resize_file(path, 0);
    volatile const char* bytes = static_cast<const char*>(a.data_ptr());
    volatile char last = bytes[a.nbytes() - 1];
    (void)last;
    ::_exit(0);  // not reached when the signal ends the process
  }
  ::close(err[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = ::read(err[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<size_t>(n));
  ::close(err[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
  CHECK_THAT(said, Catch::Contains(path) && Catch::Contains("truncated it or rewrote it in place"));
}
