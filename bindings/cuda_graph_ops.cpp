// accel.core.graphs: a CUDA graph of one training step (engine/cuda_graph.h)
// as a Lua value, for lua/accel/cuda_graphs.lua.
#include <memory>

#include "bindings/op_tables.h"
#include "engine/cuda_graph.h"

namespace accel::lua {
namespace {

using GraphPtr = std::unique_ptr<gpu::StepGraph>;

std::vector<Binding> graph_methods();

const HandleType kGraph{"accel.StepGraph", "StepGraph:", graph_methods};

gpu::StepGraph& graph_at(lua_State* L) { return *check_handle<GraphPtr>(L, 1, kGraph); }

// The methods are the engine's, one for one.
std::vector<Binding> graph_methods() {
  return {
      bind("enter_side_stream", [](lua_State* L, Receiver) { graph_at(L).enter_side_stream(); }),
      bind("leave_side_stream", [](lua_State* L, Receiver) { graph_at(L).leave_side_stream(); }),
      bind("capture_begin", [](lua_State* L, Receiver) { graph_at(L).capture_begin(); }),
      bind("capture_end", [](lua_State* L, Receiver) { graph_at(L).capture_end(); }),
      bind("abandon_capture", [](lua_State* L, Receiver) { graph_at(L).abandon_capture(); }),
      bind("captured", [](lua_State* L, Receiver) { return graph_at(L).captured(); }),
      bind("replay", [](lua_State* L, Receiver) { graph_at(L).replay(); }),
  };
}

}  // namespace

std::vector<Binding> cuda_graph_bindings() {
  return {
      bind("new", [](lua_State* L) {
        push_handle(L, kGraph, std::make_unique<gpu::StepGraph>());
        return Pushed{1};
      }),
      bind("capturing", []() { return gpu::capturing(); }),
  };
}

}  // namespace accel::lua
