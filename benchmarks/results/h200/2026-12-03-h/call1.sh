source scripts/device_call.sh
dc_begin
dc_use main
dc_run proxy 240 python benchmarks/experiments/dense_chunk_proxy.py
dc_run dense8 150 python -m swordfish_backend bench --model llama-3-8b,llama-3-70b --m 4096,8192 --bits 8 --paths dense,cublas --json $R/dense8.json --png '' -q
dc_run dense4 150 python -m swordfish_backend bench --model llama-3-8b,llama-3-70b --m 4096,8192 --bits 4 --paths dense,cublas --json $R/dense4.json --png '' -q
