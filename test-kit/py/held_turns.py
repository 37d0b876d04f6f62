"""Held streamed turns: opens N JSON-RPC `SendStreamingMessage` turns (each a model that waits S
seconds) against a server, 200 at a time over about ten seconds, reads each one's first event,
then, while all are held, reads the server's RSS (by pid) and times 100 `GET /health` probes;
prints one JSON line: turns admitted and completed, KiB of RSS per held turn, first-event p99,
probe p50/p99.

Usage: held_turns.py <host> <port> <turns> <seconds> <server pid> [path] [text]
  ours:    held_turns.py 127.0.0.1 8080 2000 20 $PID            (text: ***SLEEP <s>s done)
  a2a-sdk: held_turns.py 127.0.0.1 9000 2000 20 $PID /a2a/jsonrpc "SLEEP 20 done"
           (the echo agent of test-kit/py/a2a_echo_agent.py)
Run the client with a raised open-file limit (`ulimit -n 20000`).
"""
import asyncio
import json
import sys
import time
url_host, port, n, sleep_s, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
path = sys.argv[6] if len(sys.argv) > 6 else "/"
text = sys.argv[7] if len(sys.argv) > 7 else f"***SLEEP {sleep_s}s done"
def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
async def held(i, first_events, done):
    r, w = await asyncio.open_connection(url_host, port)
    body = json.dumps({"jsonrpc":"2.0","id":i,"method":"SendStreamingMessage","params":{"message":{"messageId":f"h-{i}-{time.time()}","role":"ROLE_USER","parts":[{"text":text}]}}}).encode()
    t = time.time()
    w.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n".encode()+body)
    await w.drain()
    status = await r.readline()
    if b"200" not in status:
        first_events.append(None); return
    while True:
        line = await r.readline()
        if not line: break
        if line.startswith(b"data:"):
            first_events.append(time.time()-t); break
    while True:
        chunk = await r.read(65536)
        if not chunk: break
        if b"COMPLETED" in chunk or b"completed" in chunk:
            done.append(1); break
    w.close()
async def probe():
    t = time.time()
    r, w = await asyncio.open_connection(url_host, port)
    w.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); await w.drain()
    await r.read(); w.close()
    return time.time()-t
async def main():
    before = rss_kib(pid)
    first, done = [], []
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(held(i, first, done)))
        if i % 200 == 199: await asyncio.sleep(1.0 * 200 / n * 10 / 10)
    while len(first) < n: await asyncio.sleep(0.2)
    during = rss_kib(pid)
    probes = sorted([await probe() for _ in range(100)])
    await asyncio.gather(*tasks)
    ok = [f for f in first if f is not None]; ok.sort()
    print(json.dumps({"held": n, "admitted": len(ok), "completed": len(done),
        "kib_per_turn": round((during-before)/max(len(ok),1),1), "rss_before_mib": before//1024, "rss_held_mib": during//1024,
        "first_event_p99_ms": round(ok[int(len(ok)*0.99)-1]*1000,1) if ok else None,
        "probe_p50_ms": round(probes[50]*1000,2), "probe_p99_ms": round(probes[98]*1000,2)}))
asyncio.run(main())
