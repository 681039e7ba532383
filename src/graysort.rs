//! `t3fs graysort`: GraySort's records (gensort 1.5's ASCII format) and valsort's checks, for
//! the smallpond pipeline of python/bench/graysort.py and for anyone sorting them elsewhere.
//! The records and the checks are t3fs-real's `workload::graysort`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use t3fs_real::workload::graysort;

/// What to do.
#[derive(Subcommand, Debug)]
pub enum GraysortCommand {
    /// Write records START..START+COUNT to a file (gensort -a -bSTART COUNT FILE).
    Gen {
        /// The first record's number.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Records to write.
        #[arg(long)]
        count: u64,
        /// The file (`-`: standard output).
        #[arg(long)]
        out: PathBuf,
    },
    /// valsort over FILES read in order as one sequence: order, count, duplicates and the
    /// order-independent checksum; with --input-rows, the count and checksum must equal those
    /// of records 0..N (the input the sort was given).
    Valsort {
        /// The sorted output, partition by partition.
        files: Vec<PathBuf>,
        /// The input was records 0..N: hold the output's count and checksum to it.
        #[arg(long)]
        input_rows: Option<u64>,
        /// Print one JSON object instead of valsort's lines.
        #[arg(long)]
        json: bool,
    },
}

fn gen(start: u64, count: u64, out: &PathBuf) -> Result<graysort::Summary, String> {
    if out.as_os_str() == "-" {
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::new(stdout.lock());
        return graysort::generate(&mut w, u128::from(start), count).map_err(|e| e.to_string());
    }
    let f = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let s = graysort::generate(&mut w, u128::from(start), count)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let f = w.into_inner().map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    Ok(s)
}

fn valsort(files: &[PathBuf], input_rows: Option<u64>, json: bool) -> Result<bool, String> {
    let out = graysort::validate(files)?;
    let input = input_rows
        .map(|n| graysort::generate(&mut std::io::sink(), 0, n).map_err(|e| e.to_string()))
        .transpose()?;
    let same = input
        .as_ref()
        .is_none_or(|i| i.records == out.records && i.checksum == out.checksum);
    let ok = out.ordered() && same;
    if json {
        println!(
            "{{\"records\": {}, \"checksum\": \"{:x}\", \"duplicates\": {}, \"unordered\": {}, \"input_records\": {}, \"input_checksum\": \"{}\", \"ok\": {ok}}}",
            out.records,
            out.checksum,
            out.duplicates,
            out.unordered,
            input.as_ref().map_or(-1, |i| i.records as i64),
            input.as_ref().map_or_else(String::new, |i| format!("{:x}", i.checksum)),
        );
    } else {
        print!("{}", out.text());
        if let Some(i) = &input {
            println!(
                "Input: {} records, checksum {:x}: {}",
                i.records,
                i.checksum,
                if same {
                    "the output holds the same records"
                } else {
                    "ERROR - the output's records differ from the input's"
                }
            );
        }
    }
    Ok(ok)
}

/// Runs `t3fs graysort`.
pub fn run(cmd: GraysortCommand) -> ExitCode {
    let r = match cmd {
        GraysortCommand::Gen { start, count, out } => gen(start, count, &out).map(|s| {
            eprintln!("{} records, checksum {:x}", s.records, s.checksum);
            true
        }),
        GraysortCommand::Valsort {
            files,
            input_rows,
            json,
        } => valsort(&files, input_rows, json),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: t3fs graysort: {e}");
            ExitCode::from(2)
        }
    }
}
