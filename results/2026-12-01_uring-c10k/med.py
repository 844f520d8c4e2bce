import sys, csv, statistics as st, collections
for fn in sys.argv[1:]:
    rows=list(csv.DictReader(open(fn), delimiter='\t'))
    g=collections.OrderedDict()
    for r in rows:
        g.setdefault((r['server'],r['backend'],r['mode']),[]).append(r)
    print('##',fn)
    for k,rs in g.items():
        def m(f):
            v=[float(r[f]) for r in rs if r.get(f) not in (None,'-','')]
            return st.median(v) if v else float('nan')
        def rng(f):
            v=sorted(float(r[f]) for r in rs if r.get(f) not in (None,'-',''))
            return f"{v[0]:g}-{v[-1]:g}" if v else '-'
        print(k, 'n=%d'%len(rs), 'req/s %.0f'%m('req_s'), 'cpu_us %.1f [%s]'%(m('cpu_us_per_req'),rng('cpu_us_per_req')), 'MB %.1f'%(m('vmhwm_kib')/1024), 'ms/GiB %.0f [%s]'%(m('cpu_ms_per_gib'),rng('cpu_ms_per_gib')))
