//! Chain tables: which storage nodes hold the replicas of each chain, and how a node's failure
//! spreads its recovery reads over its peers (3FS §5, "Data placement").
//!
//! Two generators, for `nodes` nodes with `targets` targets each and `replicas` per chain
//! (`nodes · targets / replicas` chains):
//! - [`ChainTable::round_robin`], the naive table: chain `j` takes the next `replicas` nodes in
//!   order, so when `replicas` divides `nodes` the nodes fall into fixed groups and a node shares
//!   chains only with the `replicas − 1` others of its group (3FS's design note: "A pairs only
//!   with B and C");
//! - [`ChainTable::balanced`], a (relaxed) balanced incomplete block design built greedily
//!   (each chain takes, among the nodes with targets left, those that share the fewest chains
//!   with the members chosen so far; ties: most targets left, then lowest id) and then improved
//!   by local search: swapping two nodes between two chains whenever that lowers the sum of
//!   squared pair counts (which keeps every node's target count and only stops when no single
//!   swap helps). 3FS's own generator solves an integer program for the same goal.
//!
//! The greedy construction carries no general proof of balance; instead every table states its
//! own: [`ChainTable::balance`] counts, for every pair of nodes, the chains they share (λ), and
//! the tests check `max λ − min λ ≤ 1` across a grid of sizes, which is the best any table can
//! do when `targets · (replicas − 1)` is not a multiple of `nodes − 1`. A node's recovery reads
//! go to the peers it shares chains with, in proportion to λ, so a balanced table spreads them
//! over every peer. Deterministic: no randomness, the same sizes give the same table.
//!
//! Not here: disks within a node (3FS builds the table per disk index and replicates it over a
//! node's SSDs, which changes nothing about how load spreads over nodes), or rebalancing.

/// A chain table: `chains[c]` lists the node of each replica of chain `c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainTable {
    /// Storage nodes.
    pub nodes: u32,
    /// Each chain's nodes, head first.
    pub chains: Vec<Vec<u32>>,
}

/// How evenly a table spreads pairs of nodes over chains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Balance {
    /// Fewest chains any two nodes share.
    pub min_lambda: u32,
    /// Most chains any two nodes share.
    pub max_lambda: u32,
    /// Fewest peers (nodes it shares a chain with) of any node.
    pub min_peers: u32,
    /// Targets per node, fewest and most.
    pub targets: (u32, u32),
}

fn check(nodes: u32, targets: u32, replicas: u32) -> Result<u32, String> {
    if replicas < 1 || nodes < replicas {
        return Err(format!(
            "replicas: {replicas} replicas need at least as many nodes ({nodes})"
        ));
    }
    if targets == 0 || !(nodes * targets).is_multiple_of(replicas) {
        return Err(format!(
            "targets-per-node: {nodes} nodes x {targets} targets is not a multiple of {replicas} replicas"
        ));
    }
    Ok(nodes * targets / replicas)
}

/// The change of Σλ² if node `a` of chain `x` and node `y` of chain `yc` trade places.
fn swap_gain(n: usize, pair: &[u32], x: &[u32], yc: &[u32], a: u32, y: u32) -> i64 {
    let mut d: Vec<(usize, i64)> = Vec::with_capacity(4 * x.len());
    for &o in x.iter().filter(|&&o| o != a) {
        d.push((a as usize * n + o as usize, -1));
        d.push((y as usize * n + o as usize, 1));
    }
    for &o in yc.iter().filter(|&&o| o != y) {
        d.push((y as usize * n + o as usize, -1));
        d.push((a as usize * n + o as usize, 1));
    }
    d.sort_unstable();
    let mut gain = 0i64;
    let mut k = 0;
    while k < d.len() {
        let (p, mut c) = (d[k].0, 0i64);
        while k < d.len() && d[k].0 == p {
            c += d[k].1;
            k += 1;
        }
        let l = i64::from(pair[p]);
        gain += (l + c) * (l + c) - l * l;
    }
    gain
}

/// How far a table is from even: (max λ − min λ over pairs, Σλ²).
fn spread(n: usize, pair: &[u32]) -> (u32, u64) {
    let (mut lo, mut hi, mut sq) = (u32::MAX, 0, 0u64);
    for a in 0..n {
        for b in (a + 1)..n {
            let l = pair[a * n + b];
            (lo, hi, sq) = (lo.min(l), hi.max(l), sq + u64::from(l) * u64::from(l));
        }
    }
    (hi.saturating_sub(lo), sq)
}

/// Escapes local minima: up to 400 times, one pseudo-random swap (a fixed seed, so the table
/// stays a function of its sizes) and a new descent; the most even table seen is kept.
fn kick(n: usize, chains: &mut Vec<Vec<u32>>, pair: &mut Vec<u32>) {
    let mut best = (spread(n, pair), chains.clone(), pair.clone());
    let mut z = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |m: usize| {
        z ^= z << 13;
        z ^= z >> 7;
        z ^= z << 17;
        (z % m as u64) as usize
    };
    for _ in 0..400 {
        if best.0 .0 <= 1 || chains.len() < 2 {
            break;
        }
        let (xi, yi) = (next(chains.len()), next(chains.len()));
        let (i, j) = (next(chains[xi].len()), next(chains[yi].len()));
        let (a, y) = (chains[xi][i], chains[yi][j]);
        if xi == yi || chains[xi].contains(&y) || chains[yi].contains(&a) {
            continue;
        }
        apply_swap(n, chains, pair, (xi, i), (yi, j));
        improve(n, chains, pair);
        let s = spread(n, pair);
        if s < best.0 {
            best = (s, chains.clone(), pair.clone());
        }
    }
    (*chains, *pair) = (best.1, best.2);
}

/// Trades node `chains[x.0][x.1]` and node `chains[y.0][y.1]`, keeping `pair` up to date.
fn apply_swap(
    n: usize,
    chains: &mut [Vec<u32>],
    pair: &mut [u32],
    x: (usize, usize),
    y: (usize, usize),
) {
    let (a, b) = (chains[x.0][x.1], chains[y.0][y.1]);
    for (c, from, to) in [(x.0, a, b), (y.0, b, a)] {
        for &o in chains[c].iter().filter(|&&o| o != from) {
            let (f, t, o) = (from as usize, to as usize, o as usize);
            pair[f * n + o] -= 1;
            pair[o * n + f] -= 1;
            pair[t * n + o] += 1;
            pair[o * n + t] += 1;
        }
    }
    chains[x.0][x.1] = b;
    chains[y.0][y.1] = a;
}

/// Local search: swap nodes between chains while Σλ² falls (pairs counted one way, `pair` kept
/// symmetric). Each swap lowers a non-negative integer, so it ends.
fn improve(n: usize, chains: &mut [Vec<u32>], pair: &mut [u32]) {
    let mut improved = true;
    while improved {
        improved = false;
        for xi in 0..chains.len() {
            for yi in 0..chains.len() {
                if xi == yi {
                    continue;
                }
                for i in 0..chains[xi].len() {
                    for j in 0..chains[yi].len() {
                        let (a, y) = (chains[xi][i], chains[yi][j]);
                        if chains[xi].contains(&y) || chains[yi].contains(&a) {
                            continue;
                        }
                        // Both directions of each pair move together: count one.
                        if swap_gain(n, pair, &chains[xi], &chains[yi], a, y) >= 0 {
                            continue;
                        }
                        apply_swap(n, chains, pair, (xi, i), (yi, j));
                        improved = true;
                    }
                }
            }
        }
    }
}

impl ChainTable {
    /// The naive table: chain `j` on nodes `j·replicas + r (mod nodes)`.
    pub fn round_robin(nodes: u32, targets: u32, replicas: u32) -> Result<Self, String> {
        let b = check(nodes, targets, replicas)?;
        let chains = (0..b)
            .map(|j| (0..replicas).map(|r| (j * replicas + r) % nodes).collect())
            .collect();
        Ok(Self { nodes, chains })
    }

    /// The balanced table (greedy; see the module docs).
    pub fn balanced(nodes: u32, targets: u32, replicas: u32) -> Result<Self, String> {
        let b = check(nodes, targets, replicas)?;
        let n = nodes as usize;
        let mut left = vec![targets; n];
        let mut pair = vec![0u32; n * n];
        let mut chains = Vec::with_capacity(b as usize);
        for _ in 0..b {
            let mut chain: Vec<usize> = Vec::with_capacity(replicas as usize);
            for _ in 0..replicas {
                let pick = (0..n)
                    .filter(|&x| left[x] > 0 && !chain.contains(&x))
                    .min_by_key(|&x| {
                        let shared: u32 = chain.iter().map(|&y| pair[x * n + y]).sum();
                        let worst = chain.iter().map(|&y| pair[x * n + y]).max().unwrap_or(0);
                        (worst, shared, std::cmp::Reverse(left[x]), x)
                    })
                    .ok_or("no node with a free target: the greedy construction is stuck")?;
                chain.push(pick);
            }
            for &x in &chain {
                left[x] -= 1;
                for &y in &chain {
                    if x != y {
                        pair[x * n + y] += 1;
                    }
                }
            }
            chains.push(chain.into_iter().map(|x| x as u32).collect());
        }
        improve(n, &mut chains, &mut pair);
        kick(n, &mut chains, &mut pair);
        Ok(Self { nodes, chains })
    }

    /// Chains each pair of nodes shares: `m[a][b]`.
    pub fn shared(&self) -> Vec<Vec<u32>> {
        let n = self.nodes as usize;
        let mut m = vec![vec![0u32; n]; n];
        for c in &self.chains {
            for &a in c {
                for &b in c {
                    if a != b {
                        m[a as usize][b as usize] += 1;
                    }
                }
            }
        }
        m
    }

    /// The table's balance.
    pub fn balance(&self) -> Balance {
        let m = self.shared();
        let n = self.nodes as usize;
        let pairs = (0..n).flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)));
        let lambdas: Vec<u32> = pairs.map(|(a, b)| m[a][b]).collect();
        let mut per_node = vec![0u32; n];
        for c in &self.chains {
            for &x in c {
                per_node[x as usize] += 1;
            }
        }
        Balance {
            min_lambda: lambdas.iter().copied().min().unwrap_or(0),
            max_lambda: lambdas.iter().copied().max().unwrap_or(0),
            min_peers: m
                .iter()
                .map(|row| row.iter().filter(|&&v| v > 0).count() as u32)
                .min()
                .unwrap_or(0),
            targets: (
                per_node.iter().copied().min().unwrap_or(0),
                per_node.iter().copied().max().unwrap_or(0),
            ),
        }
    }

    /// When `failed` fails, the share of its recovery reads each node serves: chains it shares
    /// with `failed` over all chains `failed` is in (one surviving replica per chain serves its
    /// copy; which one is the recovery's business, so the share is an average over them).
    pub fn recovery_shares(&self, failed: u32) -> Vec<f64> {
        let mut share = vec![0.0; self.nodes as usize];
        let mine: Vec<&Vec<u32>> = self.chains.iter().filter(|c| c.contains(&failed)).collect();
        for c in &mine {
            let peers = (c.len() - 1).max(1) as f64;
            for &x in c.iter().filter(|&&x| x != failed) {
                share[x as usize] += 1.0 / peers / mine.len() as f64;
            }
        }
        share
    }
}

#[cfg(test)]
mod tests {
    use super::ChainTable;

    #[test]
    fn balanced_tables_share_every_pair_evenly_across_a_grid_of_sizes() {
        for nodes in 3..=30u32 {
            for replicas in 2..=3u32.min(nodes) {
                for targets in [replicas, 4, 6, 8, 12] {
                    if !(nodes * targets).is_multiple_of(replicas) {
                        continue;
                    }
                    let t = ChainTable::balanced(nodes, targets, replicas).unwrap();
                    let b = t.balance();
                    let at = format!("nodes {nodes} targets {targets} replicas {replicas}: {b:?}");
                    assert_eq!(b.targets, (targets, targets), "{at}");
                    for c in &t.chains {
                        let mut s = c.clone();
                        s.dedup();
                        s.sort_unstable();
                        s.dedup();
                        assert_eq!(s.len(), replicas as usize, "distinct nodes: {at}");
                    }
                    // Enough chains per node to meet every peer: then every peer is met, and
                    // no pair is more than one chain off any other.
                    if targets * (replicas - 1) >= nodes - 1 {
                        assert!(b.min_lambda >= 1, "{at}");
                        assert!(b.max_lambda - b.min_lambda <= 1, "{at}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_naive_table_pairs_a_node_with_its_group_only_and_the_balanced_one_with_everyone() {
        let naive = ChainTable::round_robin(24, 6, 3).unwrap();
        let balanced = ChainTable::balanced(24, 6, 3).unwrap();
        assert_eq!(naive.balance().min_peers, 2, "groups of three");
        assert_eq!(
            balanced.balance().min_peers,
            12,
            "6 chains x 2 peers, all distinct"
        );
        let (n, b) = (naive.recovery_shares(0), balanced.recovery_shares(0));
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        assert!(
            (max(&n) - 0.5).abs() < 1e-9,
            "two peers read half each: {n:?}"
        );
        assert!(max(&b) <= 1.0 / 12.0 + 1e-9, "twelve peers: {b:?}");
        assert!((b.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let again = ChainTable::balanced(24, 6, 3).unwrap();
        assert_eq!(again, balanced, "deterministic");
        assert!(
            ChainTable::balanced(5, 1, 3).is_err(),
            "5 targets for chains of 3"
        );
    }
}
