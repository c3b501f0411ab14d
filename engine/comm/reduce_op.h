// How an all-reduce combines the ranks' tensors, and its names in text: the
// one place that spells them, for recipes (dist.all_reduce(t, "mean")),
// stall reports and --debug messages alike.
#pragma once
#include <optional>
#include <string_view>

namespace accel {

enum class ReduceOp { Sum, Average, Max, Min };

// "sum", "mean", "max" or "min"; "?" for a value that is no ReduceOp (a
// --debug descriptor from a rank that sent something else).
const char* reduce_op_name(ReduceOp op);

// The op named by reduce_op_name's text; nullopt for any other name.
std::optional<ReduceOp> reduce_op_from_name(std::string_view name);

}  // namespace accel
