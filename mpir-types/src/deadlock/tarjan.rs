//! Strongly connected components (Tarjan's algorithm) without recursion.

/// Strongly connected components, iteratively (no recursion, any depth).
pub(super) fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = adj.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0usize;
    let mut call: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index.get(root) != Some(&UNSEEN) || adj.get(root).is_none_or(Vec::is_empty) {
            continue;
        }
        call.push((root, 0));
        while let Some(&mut (v, ref mut e)) = call.last_mut() {
            if *e == 0 && index.get(v) == Some(&UNSEEN) {
                set(&mut index, v, next);
                set(&mut low, v, next);
                next += 1;
                stack.push(v);
                set(&mut on_stack, v, true);
            }
            let edges = adj.get(v).map_or(&[][..], Vec::as_slice);
            if let Some(&w) = edges.get(*e) {
                *e += 1;
                match index.get(w) {
                    Some(&UNSEEN) => call.push((w, 0)),
                    Some(&iw) if on_stack.get(w) == Some(&true) => {
                        let lv = low.get(v).copied().unwrap_or(0);
                        set(&mut low, v, lv.min(iw));
                    }
                    _ => {}
                }
                continue;
            }
            call.pop();
            let lv = low.get(v).copied().unwrap_or(0);
            if let Some(&(parent, _)) = call.last() {
                let lp = low.get(parent).copied().unwrap_or(0);
                set(&mut low, parent, lp.min(lv));
            }
            if Some(&lv) == index.get(v) {
                let mut scc = Vec::new();
                while let Some(x) = stack.pop() {
                    set(&mut on_stack, x, false);
                    scc.push(x);
                    if x == v {
                        break;
                    }
                }
                out.push(scc);
            }
        }
    }
    out
}

fn set<T>(v: &mut [T], i: usize, x: T) {
    if let Some(s) = v.get_mut(i) {
        *s = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tarjan_finds_rings_and_self_loops() {
        // 0 -> 1 -> 2 -> 0, 3 -> 0, 4 -> 4, 5 alone.
        let adj = vec![vec![1], vec![2], vec![0], vec![0], vec![4], vec![]];
        let mut sccs: Vec<Vec<usize>> = tarjan(&adj)
            .into_iter()
            .map(|mut s| {
                s.sort();
                s
            })
            .collect();
        sccs.sort();
        assert_eq!(sccs, vec![vec![0, 1, 2], vec![3], vec![4]]);
    }

    #[test]
    fn tarjan_is_iterative() {
        // A path of a million nodes closing into one cycle: deep enough to overflow any
        // recursive implementation's stack in a debug build (smaller under Miri, which runs
        // some thousand times slower and checks the memory accesses, not the depth).
        let n = if cfg!(miri) { 2_000 } else { 1_000_000 };
        let adj: Vec<Vec<usize>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let sccs = tarjan(&adj);
        assert_eq!(sccs.len(), 1);
        assert_eq!(sccs[0].len(), n);
    }
}
