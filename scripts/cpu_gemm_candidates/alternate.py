# Process-alternated comparison (one library per process, so thread pools never overlap):
#   python3 alternate.py N K M1,M2 rounds "cand1,cand2@OMP_NUM_THREADS=1,..."
# each candidate "name[@VAR=VAL...]" runs `./fp32 N K M SAMPLES name` in its own environment;
# per round, the ratio of block medians to the first candidate; median and order-statistic interval.
import subprocess, sys, time, random, statistics, math, os
N, K = sys.argv[1], sys.argv[2]
Ms = sys.argv[3].split(','); rounds = int(sys.argv[4]); cands = sys.argv[5].split(',')
samples = os.environ.get("SAMPLES", "15")
def block(spec, M):
    name, *envs = spec.split('@'); env = dict(os.environ)
    for e in envs: k, v = e.split('='); env[k] = v
    out = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "fp32"), N, K, M, samples, name], capture_output=True, text=True, check=True, env=env).stdout
    return float([l for l in out.splitlines() if l.startswith("RESULT")][0].split()[-1])
def ci(v):
    v = sorted(v); n = len(v); h = 1.96 * math.sqrt(n) / 2
    return v[max(0, math.floor(n/2 - h))], v[min(n-1, math.ceil(n/2 + h) - 1)]
for M in Ms:
    t = {c: [] for c in cands}; loads = []
    for r in range(rounds):
        order = cands[:]; random.shuffle(order)
        for c in order: time.sleep(0.2); t[c].append(block(c, M))
        loads.append(os.getloadavg()[0])
    print(f"N={N} K={K} M={M} rounds={rounds} load1={statistics.median(loads):.1f}")
    for c in cands:
        q = [a / b for a, b in zip(t[c], t[cands[0]])]; lo, hi = ci(q)
        print(f"  {c:44s} {statistics.median(t[c]):9.1f} us  ratio {statistics.median(q):.3f} [{lo:.3f}, {hi:.3f}]", flush=True)
