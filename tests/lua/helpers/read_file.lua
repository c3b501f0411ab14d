-- A file's whole content, read as bytes; fails naming the path.
return function(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("*a")
  f:close()
  return bytes
end
