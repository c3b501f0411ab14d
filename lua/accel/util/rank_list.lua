-- "rank 2" or "ranks 0, 1, 3": ranks as every message names them (the
-- engine's messages spell them alike: engine/protocol/rank_list.h).
return function(ranks)
  local text = {}
  for i, r in ipairs(ranks) do text[i] = tostring(r) end
  return (#ranks == 1 and "rank " or "ranks ") .. table.concat(text, ", ")
end
