-- wrk script for bench_extender.py --wrk: each connection (one per thread:
-- run wrk with -t N -c N) alternates filter and prioritize, cycling over the
-- pod shapes whose bodies bench_extender.py wrote to $BENCH_BODIES.
local dir = os.getenv("BENCH_BODIES")
local nshapes = tonumber(os.getenv("BENCH_SHAPES"))
local reqs = {}
local n = 0

local function slurp(path)
   local f = assert(io.open(path, "rb"))
   local s = f:read("*a")
   f:close()
   return s
end

function init(args)
   local hdr = { ["Content-Type"] = "application/json" }
   for i = 0, nshapes - 1 do
      reqs[#reqs + 1] = wrk.format("POST", "/gpuslice/filter", hdr,
                                   slurp(dir .. "/filter-" .. i .. ".json"))
      reqs[#reqs + 1] = wrk.format("POST", "/gpuslice/prioritize", hdr,
                                   slurp(dir .. "/prioritize-" .. i .. ".json"))
   end
end

function request()
   n = n + 1
   return reqs[(n - 1) % #reqs + 1]
end
