#!/usr/bin/env python3
# tools/hw-report-render on a run of three rounds whose figures are made up here, so every
# value of the report is known: the GEMV ratios are the medians of their repetitions (the
# library's aggregate rows ignored), each end-to-end ratio against llama.cpp is the median
# of the rounds' own ratios (not a ratio of medians), a round without llama.cpp's figures
# counts for nothing, and each target is judged on the median.
#
#   test_hw_report_render.py <path of tools/hw-report-render>
import json, os, subprocess, sys, tempfile

render = sys.argv[1]
failures = []
def check(what, got, want):
    if isinstance(want, float):
        ok = isinstance(got, (int, float)) and abs(got - want) < 1e-9
    else:
        ok = got == want
    if not ok:
        failures.append(f"{what}: got {got!r}, want {want!r}")

def gemv(name, paired, bw, reps, label):
    rows = [{"name": name, "run_name": name, "run_type": "iteration", "repetition_index": i,
             "M": 1, "N": 2048, "K": 2048, "bits": 4 if "/4/" in name else 8,
             "group": 128 if "/4/" in name else 0, "swiglu": 0, "bw_ratio": bw[i],
             "bw_ratio_paired": paired[i], "peak_ratio": 0.1, "vs_onednn": 2.0, "GOPS": 200.0,
             "GBps": 50.0, "isa_amx": 0, "label": label} for i in range(reps)]
    # What Google Benchmark appends after repetitions: must not count as rounds.
    rows.append(dict(rows[0], name=name + "_mean", run_type="aggregate", aggregate_name="mean",
                     bw_ratio_paired=99.0, bw_ratio=99.0))
    return rows

with tempfile.TemporaryDirectory() as tmp:
    raw, out = os.path.join(tmp, "raw"), os.path.join(tmp, "out")
    os.makedirs(raw)
    os.makedirs(out)
    def write(name, value):
        with open(os.path.join(raw, name), "w") as f:
            f.write(value if isinstance(value, str) else json.dumps(value))
    write("info.json", {"brand": "Test CPU", "vendor": "GenuineTest", "family": 6, "model": 1,
                        "stepping": 0, "kernel_isas": ["avx2"], "amx_reason": "no tiles here"})
    write("suites.txt", "default 0\nmax-isa-avx2 1\n")
    write("bench_gemm.json", {"benchmarks": [
        {"name": "BM_ReadBandwidth/2/iterations:1", "GBps": 50.0},
        {"name": "BM_DotPeak/2/iterations:1", "GOPS": 1000.0, "label": "vpdpbusd zmm"},
        {"name": "BM_AmxPeak/2/iterations:1", "error_message": "AMX is not usable"}]})
    int8 = "BM_Linear/2048/2048/1/8/2/0/0/min_time:0.500/manual_time"
    int4 = "BM_Linear/2048/2048/1/4/2/0/0/min_time:0.500/manual_time"
    write("bench_gemm_gemv.json", {"benchmarks":
        gemv(int8, [0.90, 1.00, 0.96], [1.2, 1.3, 1.1], 3, "k8") +
        gemv(int4, [0.91, 0.99, 0.93], [0.8, 0.9, 1.0], 3, "k4")})
    # Q4_0: three rounds, prefill ratios 3.0, 4.0 and 2.5 (median 3.0), where the ratio of
    # the medians would be 400 / 125 = 3.2; decode 2.0, 1.0, 1.5 (median 1.5).
    qf = [(80.0, 300.0), (40.0, 400.0), (60.0, 500.0)]
    peer = [(40.0, 100.0), (40.0, 100.0), (40.0, 200.0)]
    for r in range(3):
        write(f"bench-q4_0-r{r + 1}.json", "\n".join(json.dumps(x) for x in [
            {"quant": "native", "isa": "avx2", "decode_tok_s": qf[r][0], "prefill_tok_s": qf[r][1],
             "bw_ratio": 0.7 + 0.1 * r, "bytes_per_token_ratio": 1.0},
            {"quant": "woq-int4-g128", "isa": "avx2", "decode_tok_s": 30.0, "prefill_tok_s": 90.0,
             "bw_ratio": [0.95, 0.85, 0.92][r], "bw_ratio_paired": 0.9, "bytes_per_token_ratio": 1.0}]) + "\n")
        write(f"llama-bench-q4_0-r{r + 1}.json", [
            {"n_prompt": 128, "n_gen": 0, "avg_ts": peer[r][1], "build_commit": "abc",
             "build_number": 1, "cpu_info": "Test CPU", "backends": "CPU"},
            {"n_prompt": 0, "n_gen": 32, "avg_ts": peer[r][0]}])
    # Q8_0: llama.cpp's figures in round 2 only; its file is 1% larger than the bytes read.
    for r in range(3):
        write(f"bench-q8_0-r{r + 1}.json", "\n".join(json.dumps(x) for x in [
            {"quant": "native", "isa": "avx2", "decode_tok_s": 30.0 + r, "prefill_tok_s": 300.0,
             "bw_ratio": 0.8, "bytes_per_token_ratio": 1.01},
            {"quant": "woq-int8", "isa": "avx2", "decode_tok_s": 28.0, "prefill_tok_s": 80.0,
             "bw_ratio": [0.88, 0.97, 0.86][r], "bw_ratio_paired": [0.91, 0.93, 0.95][r]}]) + "\n")
    write("llama-bench-q8_0-r2.json", [{"n_prompt": 128, "n_gen": 0, "avg_ts": 50.0},
                                       {"n_prompt": 0, "n_gen": 32, "avg_ts": 20.0}])
    subprocess.run([sys.executable, render, raw, out, "test/sig", "0", "128", "3"], check=True,
                   stdout=subprocess.DEVNULL)
    report = json.load(open(os.path.join(out, "hw-test_sig.json")))
    md = open(os.path.join(out, "hw-test_sig.md")).read()
    # The same run without llama.cpp: each comparison says why it is missing.
    for name in os.listdir(raw):
        if name.startswith("llama-bench-"):
            os.remove(os.path.join(raw, name))
    subprocess.run([sys.executable, render, raw, out, "alone", "0", "128", "3"], check=True,
                   stdout=subprocess.DEVNULL)
    alone = json.load(open(os.path.join(out, "hw-alone.json")))

kernels = {k["benchmark"]: k for k in report["kernels"]}
check("GEMV cases", sorted(kernels), sorted([int8.split("/min_time")[0], int4.split("/min_time")[0]]))
k8 = kernels[int8.split("/min_time")[0]]
check("int8 paired median", k8["bw_ratio_paired"], 0.96)
check("int8 paired rounds", k8["bw_ratio_paired_rounds"], [0.90, 1.00, 0.96])
check("int8 rounds", k8["rounds"], 3)
check("int8 bw_ratio median", k8["bw_ratio"], 1.2)
e2e = {(e["file"], e["quant"]): e for e in report["end_to_end"]}
q4 = e2e[("q4_0", "native")]
check("Q4_0 prefill ratio, median of the rounds' ratios", q4["prefill_vs_llama_cpp"], 3.0)
check("Q4_0 prefill ratios", q4["prefill_vs_llama_cpp_rounds"], [3.0, 4.0, 2.5])
check("Q4_0 decode ratio", q4["decode_vs_llama_cpp"], 1.5)
check("Q4_0 qforge prefill median", q4["prefill_tok_s"], 400.0)
check("Q4_0 llama.cpp prefill median", q4["llama_cpp_prefill_tok_s"], 100.0)
check("Q4_0 rounds", q4["rounds"], 3)
q8 = e2e[("q8_0", "native")]
check("Q8_0 decode ratio from its one paired round", q8["decode_vs_llama_cpp"], 31.0 / 20.0)
check("Q8_0 paired rounds", len(q8["prefill_vs_llama_cpp_rounds"]), 1)
check("llama.cpp build", report["llama_cpp"]["build"], "abc")
check("suites", report["suites"], {"default": "passed", "max-isa-avx2": "failed (exit 1)"})
targets = {t["target"]: t for t in report["targets"]}
def target(prefix):
    found = [t for name, t in targets.items() if name.startswith(prefix)]
    check(f"one target named {prefix}...", len(found), 1)
    return found[0] if found else {}
t = target("int4-g128 GEMV bw_ratio_paired")
check("int4 paired target value", t.get("value"), 0.93)
check("int4 paired target met", t.get("met"), False)
check("int8 paired target met", target("int8 GEMV bw_ratio_paired").get("met"), True)
check("SwiGLU pair target without pair cases says so",
      target("int4-g128 SwiGLU pair GEMV bw_ratio_paired").get("missing"), "not measured")
check("prefill target Q4_0", target("prefill(128) vs llama.cpp (q4_0)").get("met"), True)
check("WOQ target on the median", targets["WOQ int4-g128 decode bw_ratio"].get("value"), 0.92)
check("WOQ int8 target on the median", targets.get("WOQ int8 decode bw_ratio", {}).get("value"), 0.88)
check("WOQ int8 target missed", targets.get("WOQ int8 decode bw_ratio", {}).get("met"), False)
check("WOQ int8 paired target met", targets.get("WOQ int8 decode bw_ratio_paired", {}).get("met"), True)
check("bytes per token Q8_0 over the file's", target("bytes per token / file's (q8_0)").get("met"), False)
amx = target("AMX int8 M=128 vs oneDNN")
check("AMX target says why", "missing" in amx and "no tiles here" in amx["missing"], True)
check("markdown shows the range", "3.000 (2.50-4.00)" in md, True)
check("markdown shows the GEMV range", "0.960 (0.90-1.00)" in md, True)

missing = [e.get("vs_llama_cpp_missing", "") for e in alone["end_to_end"] if e["quant"] == "native"]
check("without llama-bench, why", missing, ["no --llama-bench given (llama.cpp is built outside the repository)"] * 2)
check("without llama-bench, no peer", "llama_cpp" in alone, False)

for f in failures:
    print("FAIL", f)
print(f"{'FAILED' if failures else 'passed'}: hw-report-render, {len(failures)} failures")
sys.exit(1 if failures else 0)
