//! `t3fs chains generate`: a chain table for N nodes with T targets each and R replicas,
//! balanced (a greedy block design) or naive (round-robin), with how evenly it pairs nodes and
//! how a failed node's recovery reads spread over its peers.

use std::process::ExitCode;

use clap::Subcommand;
use t3fs_scenario::chain_table::ChainTable;

/// Chain table commands.
#[derive(Subcommand, Debug)]
pub enum ChainsCommand {
    /// Generate a chain table and print it with its balance.
    Generate {
        /// Storage nodes.
        #[arg(long)]
        nodes: u32,
        /// Targets per node (per disk index, as 3FS builds its tables).
        #[arg(long)]
        targets_per_node: u32,
        /// Replicas per chain.
        #[arg(long, default_value_t = 3)]
        replicas: u32,
        /// `balanced` (spreads recovery over all peers) or `round-robin` (the naive table).
        #[arg(long, default_value = "balanced", value_parser = ["balanced", "round-robin"])]
        table: String,
        /// The node whose failure the summary describes.
        #[arg(long, default_value_t = 0)]
        failed: u32,
    },
}

/// Runs a chains command.
pub fn run(cmd: ChainsCommand) -> ExitCode {
    let ChainsCommand::Generate {
        nodes,
        targets_per_node,
        replicas,
        table,
        failed,
    } = cmd;
    let t = match table.as_str() {
        "round-robin" => ChainTable::round_robin(nodes, targets_per_node, replicas),
        _ => ChainTable::balanced(nodes, targets_per_node, replicas),
    };
    let t = match t {
        Ok(t) if failed < nodes => t,
        Ok(_) => {
            eprintln!("error: --failed {failed}: not one of the {nodes} nodes");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "# chain table: {table}, {nodes} nodes x {targets_per_node} targets, {replicas} replicas"
    );
    println!("# chain: nodes (head first)");
    for (i, c) in t.chains.iter().enumerate() {
        let nodes: Vec<String> = c.iter().map(u32::to_string).collect();
        println!("{}: {}", i + 1, nodes.join(" "));
    }
    let b = t.balance();
    println!(
        "# pairs of nodes share {} to {} chains; every node meets at least {} peers; targets per node {}..{}",
        b.min_lambda, b.max_lambda, b.min_peers, b.targets.0, b.targets.1
    );
    let shares = t.recovery_shares(failed);
    let serving: Vec<(usize, f64)> = shares
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| *s > 0.0)
        .collect();
    let most = serving.iter().map(|s| s.1).fold(0.0, f64::max);
    println!(
        "# if node {failed} fails, {} peers serve its recovery reads; the busiest serves {:.1}%",
        serving.len(),
        100.0 * most
    );
    ExitCode::SUCCESS
}
