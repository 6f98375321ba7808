import re, sys, collections, statistics as st
rows = collections.defaultdict(lambda: collections.defaultdict(list))
key = None
for l in open(sys.argv[1]):
    m = re.match(r'== (\w+) (\w+) round (\d+)', l)
    if m: key = (m.group(1), m.group(2)); continue
    m = re.search(r'tx/s (\d+)', l)
    if m: rows[key]['rate'].append(float(m.group(1)))
    if l.startswith('txmq '): rows[key]['rate'].append(float(l.split()[2]))
    m = re.match(r'(all|txmq-io|txmq-writer|txmq-syncer|rocksdb:high|rocksdb:low)\s+\S+ s\s+(\S+)', l)
    if m: rows[key][m.group(1)].append(float(m.group(2)))
pub = st.median(rows[('base', 'publish1')]['rate'])
print(f"{'variant':22} {'rate (rounds)':44} {'median':>8} {'/pub1':>6} {'CPU':>6} {'writer':>7} {'io':>6} {'syncer':>7} {'bg':>6}")
for k, d in rows.items():
    bg = [a + b for a, b in zip(d['rocksdb:high'], d['rocksdb:low'])]
    med = st.median(d['rate'])
    print(f"{k[0]+' '+k[1]:22} {' '.join(f'{x:,.0f}' for x in d['rate']):44} {med:8,.0f} {med/pub:6.2f} {st.median(d['all']):6.1f} "
          f"{st.median(d['txmq-writer']):7.1f} {st.median(d['txmq-io']):6.1f} {st.median(d['txmq-syncer']):7.2f} {st.median(bg):6.2f}")
