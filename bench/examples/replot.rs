//! Draws a benchmark's `--json` report again as an SVG, on any machine:
//!
//! ```text
//! cargo run -p bench --example replot -- runs/2026-11-22/call7/02-threads.json ar.svg
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use bench::report::Report;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [json, svg] = args.as_slice() else {
        eprintln!("usage: replot REPORT.json OUT.svg");
        return ExitCode::from(2);
    };
    match Report::read_json(json).and_then(|report| report.write_svg(svg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
