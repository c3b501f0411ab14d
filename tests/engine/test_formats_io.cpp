// Checkpoint I/O below the Lua layer: CRC-32C, checksummed files, the
// manifest, atomic folders and fault injection.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/formats/atomic_folder.h"
#include "engine/formats/format_error.h"
#include "engine/formats/checksum.h"
#include "engine/formats/fault_injection.h"
#include "engine/formats/file_io.h"
#include "engine/formats/manifest.h"
#include "engine/formats/write_pace.h"
#include "tests/engine/scratch_files.h"

namespace fs = std::filesystem;
using namespace accel::formats;
using accel::testing::slurp;
using accel::testing::spit;
using accel::testing::TempDir;

TEST_CASE("CRC-32C matches the standard check values") {
  const std::string digits = "123456789";
  REQUIRE(crc32c(digits.data(), digits.size()) == 0xE3069283u);
  REQUIRE(crc32c_portable(digits.data(), digits.size()) == 0xE3069283u);
  REQUIRE(crc32c("", 0) == 0u);
  std::vector<unsigned char> zeros(32, 0);
  REQUIRE(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720 B.4
  REQUIRE(crc32c_hex(0xE3069283u) == "e3069283");
  REQUIRE(crc32c_hex(0x0000abcdu) == "0000abcd");
}

TEST_CASE("hardware and table CRC-32C agree at every length and alignment, in pieces too") {
  std::mt19937 rng(7);
  std::vector<unsigned char> data(60000);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  // Past 3 x 256 and 3 x 8192 bytes the hardware path runs three streams.
  for (std::size_t offset : {0, 1, 3, 7}) {
    for (std::size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 767, 768, 769, 1000, 4092, 24575, 24576, 24577, 59990}) {
      INFO("offset " << offset << " length " << n);
      REQUIRE(crc32c(data.data() + offset, n) == crc32c_portable(data.data() + offset, n));
    }
  }
  Crc32c pieces;
  pieces.update(data.data(), 5);
  pieces.update(data.data() + 5, 30000);
  pieces.update(data.data() + 30005, data.size() - 30005);
  REQUIRE(pieces.value() == crc32c(data.data(), data.size()));
}

TEST_CASE("a written file's digest is that of its bytes, and reading checks it") {
  TempDir dir;
  std::string path = dir.path + "/f.txt";
  FileDigest written = write_whole_file(path, "hello checkpoint");
  REQUIRE(written.size == 16);
  REQUIRE(written.crc32c == crc32c("hello checkpoint", 16));
  FileDigest read;
  REQUIRE(read_whole_file(path, 1024, &read) == "hello checkpoint");
  REQUIRE(read.size == written.size);
  REQUIRE(read.crc32c == written.crc32c);
  REQUIRE(digest_file(path).crc32c == written.crc32c);

  check_digest(path, written, read);
  FileDigest other = written;
  other.crc32c ^= 1;
  REQUIRE_THROWS_WITH(check_digest(path, other, read),
                      Catch::Contains("f.txt") && Catch::Contains("checksum"));
  other = written;
  other.size += 1;
  REQUIRE_THROWS_WITH(check_digest(path, other, read), Catch::Contains("f.txt") && Catch::Contains("truncated"));
  REQUIRE_THROWS_WITH(read_whole_file(dir.path + "/missing", 1024), Catch::Contains("missing"));
}

static double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

TEST_CASE("a paced writer writes the same bytes in small chunks and sleeps to keep its share of a core") {
  TempDir dir;
  // 24 MiB: six of the paced writer's chunks, the last one short.
  std::vector<unsigned char> bytes((std::size_t{24} << 20) + 12345);
  std::mt19937 random(7);
  for (auto& b : bytes) b = static_cast<unsigned char>(random());
  FileWriter plain(dir.path + "/plain");
  plain.write(bytes.data(), bytes.size());
  const FileDigest plain_digest = plain.finish();

  // A share of a hundredth: whatever CPU time the writing takes, its wall
  // time is at least a hundred times it (a lower bound, so a slow or busy
  // machine cannot fail it; the pace sleeps after the last chunk too).
  WritePace pace(0.01);
  FileWriter paced(dir.path + "/paced", &pace);
  const auto wall_start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_seconds();
  pace.begin();
  paced.write(bytes.data(), bytes.size());
  const double cpu_s = thread_cpu_seconds() - cpu_start;
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const FileDigest paced_digest = paced.finish();
  REQUIRE(paced_digest.size == plain_digest.size);
  REQUIRE(paced_digest.crc32c == plain_digest.crc32c);
  REQUIRE(slurp(dir.path + "/paced") == slurp(dir.path + "/plain"));
  INFO("cpu " << cpu_s << " s, wall " << wall_s << " s");
  REQUIRE(cpu_s > 0);
  REQUIRE(wall_s >= 0.9 * cpu_s / 0.01);

  REQUIRE_THROWS_WITH(WritePace(0.0), Catch::Contains("(0, 1]"));
  REQUIRE_THROWS_WITH(WritePace(1.5), Catch::Contains("(0, 1]"));
}

TEST_CASE("a reader refuses what is not a regular file, at once") {
  // Opening a FIFO for reading waits for a writer: a planted one would
  // hang the run forever.
  TempDir dir;
  const std::string fifo = dir.path + "/weights.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(read_whole_file(fifo, 1024),
                      Catch::Contains("weights.safetensors") && Catch::Contains("not a regular file (a FIFO)"));
  REQUIRE_THROWS_WITH(FileReader(dir.path), Catch::Contains("not a regular file (a directory)"));
}

TEST_CASE("a manifest survives JSON and back") {
  Manifest m;
  m.step = 20;
  m.iteration = 1;
  m.world_size = 2;
  m.files.push_back({"model.safetensors", "safetensors", {123456789012ull, 0xdeadbeefu}});
  m.files.push_back({"scheduler \"a\".lua", "lua", {10, 0x00000001u}});
  std::string json = manifest_to_json(m);
  REQUIRE(json.find("\"format_version\": 1") != std::string::npos);
  Manifest back = parse_manifest(json, "manifest.json");
  REQUIRE(back.step == 20);
  REQUIRE(back.iteration == 1);
  REQUIRE(back.world_size == 2);
  REQUIRE(back.files.size() == 2);
  REQUIRE(back.files[0].name == "model.safetensors");
  REQUIRE(back.files[0].digest.size == 123456789012ull);
  REQUIRE(back.files[0].digest.crc32c == 0xdeadbeefu);
  REQUIRE(back.files[1].name == "scheduler \"a\".lua");
  REQUIRE(back.files[1].format == "lua");
  REQUIRE(back.file("scheduler \"a\".lua", "ck").digest.size == 10);
  REQUIRE_THROWS_WITH(back.file("rng_3.safetensors", "ck"), Catch::Contains("rng_3.safetensors"));
}

TEST_CASE("bad manifests are refused with the reason") {
  REQUIRE_THROWS_WITH(parse_manifest("{\"format\": \"accel-checkpoint\", ", "m.json"),
                      Catch::Contains("m.json") && Catch::Contains("not valid JSON"));
  REQUIRE_THROWS_WITH(parse_manifest("{\"format\": \"other\"}", "m.json"), Catch::Contains("not an accel"));
  REQUIRE_THROWS_WITH(
      parse_manifest("{\"format\": \"accel-checkpoint\", \"format_version\": 99, \"step\": 0, \"iteration\": 0, "
                     "\"world_size\": 1, \"files\": []}", "m.json"),
      Catch::Contains("format_version 99"));
  REQUIRE_THROWS_WITH(
      parse_manifest("{\"format\": \"accel-checkpoint\", \"format_version\": 1, \"step\": 0, \"iteration\": 0, "
                     "\"world_size\": 1, \"files\": [{\"name\": \"../x\", \"format\": \"lua\", \"size\": 1, "
                     "\"crc32c\": \"00000000\"}]}", "m.json"),
      Catch::Contains("../x"));
  REQUIRE_THROWS_WITH(
      parse_manifest("{\"format\": \"accel-checkpoint\", \"format_version\": 1, \"iteration\": 0, "
                     "\"world_size\": 1, \"files\": []}", "m.json"),
      Catch::Contains("'step'"));
}

TEST_CASE("a folder without a manifest, or with a file of the wrong size, is refused naming it") {
  TempDir dir;
  std::string ck = dir.path + "/checkpoint_0";
  fs::create_directories(ck);
  REQUIRE_THROWS_WITH(read_manifest(ck), Catch::Contains("checkpoint_0") && Catch::Contains("no manifest.json"));
  REQUIRE_THROWS_WITH(read_manifest(dir.path + "/nowhere"), Catch::Contains("does not exist"));
  Manifest m;
  m.files.push_back({"a.lua", "lua", write_whole_file(ck + "/a.lua", "return 1")});
  write_manifest(ck, m);
  check_file_sizes(ck, read_manifest(ck));
  spit(ck + "/a.lua", "return");
  REQUIRE_THROWS_WITH(check_file_sizes(ck, read_manifest(ck)), Catch::Contains("a.lua") && Catch::Contains("6 bytes"));
  fs::remove(ck + "/a.lua");
  REQUIRE_THROWS_WITH(check_file_sizes(ck, read_manifest(ck)), Catch::Contains("a.lua") && Catch::Contains("missing"));
}

TEST_CASE("commit_folder renames into place and atomically replaces an existing folder") {
  TempDir dir;
  std::string target = dir.path + "/run/checkpoint_0";
  std::string tmp = temporary_folder_for(target);
  REQUIRE(tmp == dir.path + "/run/.checkpoint_0.tmp");
  REQUIRE(temporary_folder_for(target + "/") == tmp);

  make_empty_folder(tmp);
  spit(tmp + "/x", "first");
  commit_folder(tmp, target);
  REQUIRE(slurp(target + "/x") == "first");
  REQUIRE_FALSE(fs::exists(tmp));

  make_empty_folder(tmp);
  spit(tmp + "/stale", "left by a save that died");
  make_empty_folder(tmp);  // a new save starts from nothing
  REQUIRE(fs::is_empty(tmp));
  spit(tmp + "/y", "second");
  commit_folder(tmp, target);
  REQUIRE(slurp(target + "/y") == "second");
  REQUIRE_FALSE(fs::exists(target + "/x"));
  REQUIRE_FALSE(fs::exists(tmp));
  remove_folder(target);
  REQUIRE_FALSE(fs::exists(target));
}

TEST_CASE("remove_folder takes the folder's name away first; a removal cut short leaves only a dotted name") {
  TempDir dir;
  const std::string target = dir.path + "/checkpoint_2";
  const std::string doomed = dir.path + "/.checkpoint_2.removing";
  make_empty_folder(target + "/sub");
  spit(target + "/sub/x", "weights");
  remove_folder(target);
  CHECK_FALSE(fs::exists(target));
  CHECK_FALSE(fs::exists(doomed));
  // What a removal killed half-way leaves: the dotted folder, which the
  // next removal of that name clears, the folder being absent or not.
  make_empty_folder(doomed);
  spit(doomed + "/half", "left behind");
  remove_folder(target);
  CHECK_FALSE(fs::exists(doomed));
  make_empty_folder(doomed);
  make_empty_folder(target);
  remove_folder(target + "/");
  CHECK_FALSE(fs::exists(target));
  CHECK_FALSE(fs::exists(doomed));
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("a fault point kills the process with SIGKILL at the occurrence asked for") {
  auto run = [](const char* spec, int hits) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("ACCEL_FAULT_INJECT", spec, 1);
      for (int i = 0; i < hits; ++i) fault_point("checkpoint-before-manifest");
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  int killed = run("checkpoint-before-manifest", 1);
  REQUIRE(WIFSIGNALED(killed));
  REQUIRE(WTERMSIG(killed) == SIGKILL);
  int second = run("other,checkpoint-before-manifest@2", 1);
  REQUIRE(WIFEXITED(second));
  int reached = run("other,checkpoint-before-manifest@2", 2);
  REQUIRE(WIFSIGNALED(reached));
  int other = run("checkpoint-before-commit", 3);
  REQUIRE(WIFEXITED(other));
}
