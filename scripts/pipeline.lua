-- pipeline.lua makes wrk send DEPTH requests in one write and read their
-- DEPTH responses before the next write (HTTP/1.1 pipelining), the way
-- pipelined benchmarks of fasthttp and the TechEmpower plaintext test do.
--
--   wrk -t1 -c50 -d3s -s scripts/pipeline.lua http://127.0.0.1:8080/ -- 16 /
--
-- Arguments after --: DEPTH (default 16) and PATH (default the URL's path).
-- wrk counts every response, so its requests and req/s are per request;
-- its latency is per batch.

local batch

function init(args)
   local depth = tonumber(args[1]) or 16
   local path = args[2] or wrk.path
   local reqs = {}
   for i = 1, depth do
      reqs[i] = wrk.format(nil, path)
   end
   batch = table.concat(reqs)
end

function request()
   return batch
end
