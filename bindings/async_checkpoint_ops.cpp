// accel.core.async_checkpoint: the engine's half of acc:save_state(dir,
// {async = true}) (lua/accel/live/async_save.lua). A writer takes what a
// save would write, stages it in host memory at once (tensors copied, their
// file's size and CRC-32C computed, so the manifest can list them), and
// writes it on its background thread (engine/formats/background_writer.h)
// with the same functions a synchronous save uses, so the files are the
// same bytes.
#include <ATen/ATen.h>

#include <memory>

#include "bindings/checkpoint_values.h"
#include "bindings/op_tables.h"
#include "bindings/typed_userdata.h"
#include "engine/formats/atomic_folder.h"
#include "engine/formats/background_writer.h"
#include "engine/formats/format_error.h"
#include "engine/formats/checksum.h"

namespace accel::lua {
namespace {

namespace formats = accel::formats;
using WriterPtr = std::unique_ptr<formats::BackgroundWriter>;

std::vector<Binding> writer_methods();
const HandleType kWriter{"accel.CheckpointWriter", "CheckpointWriter:", writer_methods};

formats::BackgroundWriter& writer_at(lua_State* L) { return *check_handle<WriterPtr>(L, 1, kWriter); }

// A step that writes what `write` writes and checks it is what the
// manifest was told.
void check_written(const std::string& path, const formats::FileDigest& staged, const formats::FileDigest& written) {
  if (staged.size != written.size || staged.crc32c != written.crc32c) {
    throw formats::FormatError("'" + path + "' was written with another size or checksum than it was staged with");
  }
}

std::vector<Binding> writer_methods() {
  return {
      // tensors(path, {{name, tensor}, ...}) -> digest: copies the tensors
      // to host memory now, writes them later.
      bind("tensors", [](lua_State* L, Receiver, std::string path) {
        formats::NamedTensors staged;
        for (auto& [name, tensor] : read_pairs(L, 3)) {
          staged.emplace_back(name, tensor.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous());
        }
        const formats::FileDigest digest = formats::safetensors_digest(staged);
        writer_at(L).add([path, staged = std::move(staged), digest](formats::WritePace& pace) {
          check_written(path, digest, formats::write_safetensors(path, staged, {}, &pace));
        });
        return push_digest(L, digest);
      }),
      bind("text", [](lua_State* L, Receiver, std::string path, std::string text) {
        const formats::FileDigest digest{text.size(), formats::crc32c(text.data(), text.size())};
        writer_at(L).add([path, text = std::move(text), digest](formats::WritePace&) {
          check_written(path, digest, formats::write_whole_file(path, text));
        });
        return push_digest(L, digest);
      }),
      // marker(folder, rank): this rank's files are all written.
      bind("marker", [](lua_State* L, Receiver, std::string folder, int64_t rank) {
        writer_at(L).add([folder, rank](formats::WritePace&) { formats::write_rank_marker(folder, static_cast<int>(rank)); });
      }),
      // manifest(folder, manifest, world_size, timeout_ms): once every
      // rank's marker is there, the manifest.
      bind("manifest", [](lua_State* L, Receiver, std::string folder) {
        formats::Manifest manifest = read_manifest_table(L, 3);
        const int64_t world_size = luaL_checkinteger(L, 4);
        const int64_t timeout_ms = luaL_checkinteger(L, 5);
        writer_at(L).add([folder, manifest = std::move(manifest), world_size, timeout_ms](formats::WritePace&) {
          formats::wait_for_rank_markers(folder, static_cast<int>(world_size), timeout_ms);
          formats::write_manifest(folder, manifest);
        });
      }),
      bind("commit", [](lua_State* L, Receiver, std::string temporary, std::string folder) {
        writer_at(L).add([temporary, folder](formats::WritePace&) { formats::commit_folder(temporary, folder); });
      }),
      // start(share): the share of a core the writing may use (write_pace.h).
      bind("start", [](lua_State* L, Receiver, double share) { writer_at(L).start(share); }),
      bind("wait", [](lua_State* L, Receiver) { writer_at(L).wait(); }),
      bind("finished", [](lua_State* L, Receiver) { return writer_at(L).finished(); }),
  };
}

}  // namespace

std::vector<Binding> async_checkpoint_bindings() {
  return {
      bind("writer", [](lua_State* L) {
        push_handle(L, kWriter, std::make_unique<formats::BackgroundWriter>());
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
