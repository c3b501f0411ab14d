-- Accelerate's clean_device_map: entries under one module that all go to
-- the same device become one entry for that module, from the model down
-- ({"" = "cpu"} for a model that fits, "blocks.2" for a block whose layers
-- share a device), so infer_auto_device_map returns the map Accelerate's
-- returns. Takes the map and its names in model order and returns new ones:
-- a merged entry takes the place of its first child.
local function under(name, prefix)
  return name:sub(1, #prefix) == prefix
end

local function clean(map, order, module_name)
  local prefix = module_name == "" and "" or module_name .. "."
  local inside, device, uniform = {}, nil, true
  for i, name in ipairs(order) do
    if under(name, prefix) then
      inside[#inside + 1] = i
      if device == nil then
        device = map[name]
      elseif map[name] ~= device then
        uniform = false
      end
    end
  end
  if uniform and #inside > 1 then
    for k = #inside, 1, -1 do
      map[order[inside[k]]] = nil
      table.remove(order, inside[k])
    end
    table.insert(order, inside[1], module_name)
    map[module_name] = device
  end
  -- The children one level below, in model order.
  local depth = module_name == "" and 1 or select(2, module_name:gsub("%.", "")) + 2
  local seen, children = {}, {}
  for _, name in ipairs(order) do
    if under(name, prefix) and #name > #module_name then
      local pieces = {}
      for piece in name:gmatch("[^.]+") do pieces[#pieces + 1] = piece end
      local child = table.concat(pieces, ".", 1, math.min(depth, #pieces))
      if not seen[child] then
        seen[child] = true
        children[#children + 1] = child
      end
    end
  end
  for _, child in ipairs(children) do clean(map, order, child) end
end

return function(map, order)
  local cleaned, names = {}, {}
  for i, name in ipairs(order) do
    names[i] = name
    cleaned[name] = map[name]
  end
  clean(cleaned, names, "")
  return cleaned, names
end
