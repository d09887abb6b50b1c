"""The figures of Nori's paper, reproduced with sparsedyn's exact operation counts.

F. Nori, *Inverse, forward and other dynamic computations computationally optimized with sparse
matrix factorizations*, 2017 (arXiv:1705.04658).

    .venv/bin/python benchmarks/nori_figures.py               # writes docs/nori_fig1.png, docs/nori_fig2.png,
                                                               # docs/nori_figures.md (about a minute)
    .venv/bin/python benchmarks/nori_figures.py --quick       # fewer N_B, for a look

* Fig. 1: forward dynamics of Featherstone's autoTree(NB, 1, 1.5, 0.9) (sparsedyn.auto_tree), N_B = 2..30:
  multiplications and additions of Featherstone's published ABA count (224n - 259 / 205n - 248), of
  sparsedyn's ABA kernel, and of the sparse LU solve of the Newton-Euler system with three static
  orders: articulated (ABA as Gaussian elimination), COLAMD (SciPy's SuperLU), and SuperLU's natural
  column order (the unpermuted columns, rows pivoted once at a generic state; N_B <= 12 only: its
  fill-in grows like N_B^3).
* Fig. 2: the load-cell estimation problem on a free-floating autoTree(NB, 1, 1.5, 1), N_B = 8..20:
  sparse LU with a static COLAMD order against a dense LU of the same square system.
* Prop. 2 checked numerically: ABA's matrix form W^L [D; Y] W^R is lower triangular.

Every count of a traced computation comes from the one counting rule of sparsedyn
(sparsedyn.symbolic.ir.Program.flops): operations on state-dependent values, structural zeros and
+-1 free, common subexpressions once.  The sparse counts are those of the qdd outputs (what ABA
returns) for Fig. 1 and of the whole solution d for Fig. 2.  The dense LU counts are the exact
counts of the textbook algorithm (Doolittle without pivoting search, two substitutions).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import sparsedyn as sd                                    # noqa: E402
from sparsedyn import sparse                              # noqa: E402
from sparsedyn.sparse import flops                        # noqa: E402
from sparsedyn.model.spatial import motion_matrix               # noqa: E402
from sparsedyn.algorithms.kinematics import joint_transforms   # noqa: E402

NATURAL_MAX = 12


def fig1_rows(ns):
    rows = []
    for n in ns:
        model = sd.auto_tree(n, 1, 1.5, 0.9)
        aba = flops.count_aba(model)
        r = {"n": n, "book": (flops.ABA_FORMULA[0](n), flops.ABA_FORMULA[1](n)), "aba": (aba["mul"], aba["add"])}
        fdp = sparse.forward_dynamics_problem(model)
        for o in ("articulated", "colamd") + (("natural",) if n <= NATURAL_MAX else ()):
            st = fdp.analyze(ordering=o)
            prog = flops.trace_solve(st, ("qdd",))
            c = prog.flops()
            r[o] = (c["mul"], c["add"], c["div"])
            r[o + "_fill"] = st.fill
            if o == "articulated":                    # the LU alone: what a count of a given matrix sees
                ph = prog.phase_flops()
                r["lu_only"] = tuple(sum(ph[p][k] for p in ("factor", "solve") if p in ph) for k in ("mul", "add"))
        rows.append(r)
    return rows


def load_cell_problem(n):
    """Nori's section VI case on a chain: a free-floating autoTree(n, 1, 1.5, 1) standing on its two
    extremal links (bodies 1 and n).  Load cells measure five of the six components of each contact
    wrench (all but the moment about z, eq. 23 read as its text intends); every other external wrench
    is known (zero), the free base is unactuated (tau = 0 known), and the accelerations of the two
    joints next to each end are unknown, which makes the system square."""
    model = sd.auto_tree(n, 1, 1.5, 1.0, floating_base=True)
    names = model.joint_names
    ends = [names.index("joint1"), names.index(f"joint{n}")]
    near = {names.index(f"joint{k}") for k in (2, 3, n - 1, n)}
    known_qdd = [i for i in range(model.nbodies) if i not in near]
    inner = [i for i in range(model.nbodies) if i not in ends]
    p = (sparse.Problem(model, name=f"load cells on autoTree({n})").known("tau", joints=[ends[0]])
         .known("qdd", joints=known_qdd).known("fx", bodies=inner).known("fx", bodies=ends, components=[0, 1, 3, 4, 5]))
    return model, p


def dense_lu_counts(n):
    """Exact (mul, add, div) of an n x n LU without pivot search plus the two triangular solves."""
    mul = (n - 1) * n * (2 * n - 1) // 6 + n * (n - 1)
    return mul, mul, n * (n - 1) // 2 + n


def fig2_rows(ns, rng):
    rows = []
    for n in ns:
        model, p = load_cell_problem(n)
        st = p.analyze()
        q = model.random_configuration(rng, limits=False)
        A = st.matrix(q).toarray()
        sv = np.linalg.svd(A, compute_uv=False)
        c = flops.trace_solve(st).flops()
        rows.append({"n": n, "unknowns": st.n, "sparse": (c["mul"], c["add"], c["div"]), "dense": dense_lu_counts(st.n),
                     "cond": sv[0] / sv[-1], "fill": st.fill, "blocks": st.block_sizes(), "proven": st.proven})
    return rows


def prop2(n=8, seed=0):
    """ABA's matrix form (Nori, Prop. 2 and appendix B) at a random state of autoTree(n, 1, 1.5, 0.9)."""
    model = sd.auto_tree(n, 1, 1.5, 0.9)
    st = sparse.forward_dynamics_problem(model).analyze()
    L, P = st.layout, st.pattern
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, limits=False)
    D = st.matrix(q).toarray()
    N = D.shape[0]
    Xup, S = joint_transforms(model, q)
    X = [np.asarray(motion_matrix(x), float) for x in Xup]
    S = [np.asarray(s, float) for s in S]
    children = [[j for j in range(model.nbodies) if model.parent[j] == i] for i in range(model.nbodies)]
    IA = [None] * model.nbodies
    for i in range(model.nbodies - 1, -1, -1):                       # articulated inertias (ABA pass 2)
        IA[i] = model.inertia[i].copy()
        for j in children[i]:
            U = IA[j] @ S[j]
            Ia = IA[j] - U @ np.linalg.solve(S[j].T @ U, U.T)
            IA[i] += X[j].T @ Ia @ X[j]
    col = lambda k, i: L.var(k, i).slice                              # noqa: E731
    row = lambda k, i: L.eq(k, i).slice                               # noqa: E731
    meas = {(m.known, m.terms[0][0].body): e.slice
            for m, e in zip(st.problem.measurements, P.equations[len(L.equations):])}
    WR = np.eye(N)
    W = [np.eye(N) for _ in range(4)]
    for i in range(model.nbodies):
        WR[col("f", i), col("a", i)] = IA[i]                          # S1: f_i = pA_i + IA_i a_i
        Di = S[i].T @ IA[i] @ S[i]
        W[0][row("3tau", i), row("3a", i)] = S[i].T @ IA[i]           # S2: (3a_i) into (3tau_i)
        W[1][row("3tau", i), row("3tau", i)] = np.linalg.inv(Di)      # S3: times D_i^-1
        W[2][row("3a", i), row("3tau", i)] = -S[i]                    # S4: qdd_i out of (3a_i)
        for j in children[i]:
            W[3][row("3f", i), row("3a", j)] = X[j].T @ IA[j]         # S5: a_j out of (3f_i)
    M = W[3] @ W[2] @ W[1] @ W[0] @ D @ WR
    bodies = range(model.nbodies)
    cols = np.concatenate([np.r_[col("fx", i), col("tau", i)] for i in bodies]
                          + [np.r_[col("f", i)] for i in reversed(bodies)] + [np.r_[col("a", i)] for i in bodies]
                          + [np.r_[col("qdd", i)] for i in bodies])

    def upper(rows):
        T = M[np.ix_(rows, cols)]
        return float(np.max(np.abs(np.triu(T, 1))) / np.max(np.abs(T)))

    ours = np.concatenate([np.r_[meas["fx", i], meas["tau", i]] for i in bodies]
                          + [np.r_[row("3f", i)] for i in reversed(bodies)] + [np.r_[row("3a", i)] for i in bodies]
                          + [np.r_[row("3tau", i)] for i in bodies])
    # eq. (34) as printed: c(3tau) rows interleaved with the known-fx rows, the known-tau rows last
    printed = np.concatenate([np.r_[meas["fx", i], row("3tau", model.nbodies - 1 - i)] for i in bodies]
                             + [np.r_[row("3f", i)] for i in reversed(bodies)] + [np.r_[row("3a", i)] for i in bodies]
                             + [np.r_[meas["tau", i]] for i in bodies])
    nnz = [int(np.count_nonzero(w - np.eye(N))) for w in [WR] + W]
    dense_products = 6 * 2 * N ** 3
    return {"n": n, "N": N, "upper_ours": upper(ours), "upper_printed": upper(printed), "nnz_W": nnz,
            "dense_flops": dense_products, "aba": flops.count_aba(model), "diag": np.diag(M[np.ix_(ours, cols)])}


def plot(rows1, rows2, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ns = [r["n"] for r in rows1]
    series = [("book", "Featherstone ABA (224n-259 / 205n-248)", "k--"), ("aba", "sparsedyn ABA kernel", "k-"),
              ("articulated", "sparse LU, articulated order", "C0-"), ("colamd", "sparse LU, COLAMD", "C1-"),
              ("natural", "sparse LU, natural columns", "C2:")]
    for ax, k, what in ((axes[0], 0, "multiplications"), (axes[1], 1, "additions")):
        for key, label, style in series:
            pts = [(r["n"], r[key][k]) for r in rows1 if key in r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        ax.set_xlabel("N_B (autoTree(N_B, 1, 1.5, 0.9))")
        ax.set_ylabel(what)
        ax.set_ylim(0, 1.15 * max(r["colamd"][k] for r in rows1))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Fig. 1: forward dynamics, operations per call (qdd outputs)")
    fig.tight_layout()
    fig.savefig(out / "nori_fig1.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ns = [r["n"] for r in rows2]
    ax.semilogy(ns, [sum(r["sparse"]) for r in rows2], "C1-o", label="sparse LU, static COLAMD order")
    ax.semilogy(ns, [sum(r["dense"]) for r in rows2], "k--s", label="dense LU")
    ax.set_xlabel("N_B (free-floating autoTree(N_B, 1, 1.5, 1))")
    ax.set_ylabel("mul + add + div per solve")
    ax.set_title("Fig. 2: load-cell estimation (eq. 23), all unknowns")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "nori_fig2.png", dpi=110)
    plt.close(fig)


def markdown(rows1, rows2, p2, seconds):
    md = ["# Nori's figures, reproduced", "",
          "Generated by `benchmarks/nori_figures.py` (counts from `sparsedyn.symbolic.ir.Program.flops`).", "",
          "## Fig. 1: forward dynamics, autoTree(N_B, 1, 1.5, 0.9)", "",
          "mul / add (sparse: / div; fill = fill-in slots of the static order). The sparse solves are counted "
          "end to end from (q, v, tau), as ABA is; \"factor + solve\" is the LU of the given matrix alone.", "",
          "| N_B | Featherstone ABA | ABA kernel | articulated LU | (its factor + solve) | fill | COLAMD LU | fill | "
          "natural LU | fill |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    f = lambda t: " / ".join(str(x) for x in t)                       # noqa: E731
    for r in rows1:
        nat = (f(r["natural"]), r["natural_fill"]) if "natural" in r else ("-", "-")
        md.append(f"| {r['n']} | {f(r['book'])} | {f(r['aba'])} | {f(r['articulated'])} | {f(r['lu_only'])} | "
                  f"{r['articulated_fill']} | "
                  f"{f(r['colamd'])} | {r['colamd_fill']} | {nat[0]} | {nat[1]} |")
    last = rows1[-1]
    md += ["", f"At N_B = {last['n']}: articulated LU / ABA kernel = "
               f"{sum(last['articulated'][:2]) / sum(last['aba']):.2f} (mul + add), COLAMD LU / ABA kernel = "
               f"{sum(last['colamd'][:2]) / sum(last['aba']):.2f}.", "",
           "## Fig. 2: load-cell estimation on a free-floating autoTree(N_B, 1, 1.5, 1)", "",
           "| N_B | unknowns | sparse LU mul / add / div | dense LU mul / add / div | dense / sparse | cond(A) | proven pivots |",
           "|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows2:
        md.append(f"| {r['n']} | {r['unknowns']} | {f(r['sparse'])} | {f(r['dense'])} | "
                  f"{sum(r['dense']) / sum(r['sparse']):.0f} | {r['cond']:.1e} | {'yes' if r['proven'] else 'no'} |")
    md += ["", f"## Prop. 2 (N_B = {p2['n']}, {p2['N']} x {p2['N']})", "",
           f"* rows and columns in the order of ABA (known fx_i, tau_i; f_NB .. f_1; a_1 .. a_NB; qdd_1 .. qdd_NB, "
           f"rows c(3tau_i) last): largest entry above the diagonal / largest entry = {p2['upper_ours']:.1e} "
           f"(lower triangular: **holds**), diagonal entries in {{{', '.join(sorted({f'{x:g}' for x in np.round(p2['diag'], 12)}))}}};",
           f"* rows in the order printed as eq. (34) (rows c(3tau_i) next to the known-fx rows): "
           f"{p2['upper_printed']:.1e} (not triangular: those rows contain qdd_i, whose columns come last);",
           f"* cost: the W matrices need the articulated inertias IA_i, i.e. ABA's second pass; nonzeros off the "
           f"identity of W^R, W^L1..4: {p2['nnz_W']}. Formed as dense products the check costs "
           f"{p2['dense_flops']:.1e} flops; applied block by block it is ABA itself "
           f"({p2['aba']['mul']} mul / {p2['aba']['add']} add for this model).", "",
           f"({seconds:.0f} s)"]
    return "\n".join(md) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ns1 = [2, 3, 5, 8, 12, 20, 30] if args.quick else list(range(2, 31))
    ns2 = [8, 14, 20] if args.quick else list(range(8, 21))
    rows1 = fig1_rows(ns1)
    rows2 = fig2_rows(ns2, np.random.default_rng(0))
    p2 = prop2()
    plot(rows1, rows2, out)
    text = markdown(rows1, rows2, p2, time.perf_counter() - t0)
    (out / "nori_figures.md").write_text(text)
    print(text)
    print(f"wrote {out / 'nori_fig1.png'}, {out / 'nori_fig2.png'}, {out / 'nori_figures.md'}")


if __name__ == "__main__":
    main()
