// "rank 2" or "ranks 0, 1, 3": ranks as every message names them, the
// launcher's stall reports and the workers' collective checks alike (and
// lua/accel/rank_list.lua on the Lua side).
#pragma once
#include <string>
#include <vector>

namespace accel {

std::string rank_list(const std::vector<int>& ranks);

}  // namespace accel
