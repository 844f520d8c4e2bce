-- cold.lua makes wrk ask for the files of a cold set (labrun's cold:SET cells,
-- scripts/steps/cold.steps) in
-- a random order without repeats: a file read once is in the page cache,
-- so asking for it again would measure memory, not the disk. With N files
-- and a run shorter than reading them all, no request is a repeat.
--
--   wrk -t1 -c16 -d15s -s scripts/cold.lua http://127.0.0.1:8080/ -- PREFIX N SEED
--
-- Arguments after --: PREFIX (the path before the file's number, e.g.
-- /big/), N (the set's size; files are PREFIX00000 .. PREFIX<N-1>, five
-- digits) and SEED (the shuffle's seed; labrun gives each cell its own).
-- done() prints the exact bytes read and the run's length, which wrk's
-- own report rounds: "cold: requests=R bytes=B seconds=S errors=E".
-- Use -t1: each wrk thread has its own Lua state, and so its own order.

local paths = {}
local next_i = 1

function init(args)
   local prefix = args[1] or "/"
   local n = tonumber(args[2]) or 1
   math.randomseed(tonumber(args[3]) or os.time())
   for i = 1, n do
      paths[i] = string.format("%s%05d", prefix, i - 1)
   end
   -- Fisher-Yates
   for i = n, 2, -1 do
      local j = math.random(i)
      paths[i], paths[j] = paths[j], paths[i]
   end
end

function request()
   local p = paths[next_i]
   next_i = next_i % #paths + 1
   return wrk.format(nil, p)
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format("cold: requests=%d bytes=%d seconds=%.6f errors=%d status=%d\n",
      summary.requests, summary.bytes, summary.duration / 1e6,
      e.connect + e.read + e.write + e.timeout, e.status))
end
