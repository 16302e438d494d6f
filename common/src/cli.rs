//! Command-line options shared by every program.

/// Options every lesson takes. Each one can also be set through the
/// environment variable named in `--help`.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchArgs {
    /// Ranks to start as threads of this process, one GPU each [default: every
    /// visible GPU]. Not used in MPI mode, where mpirun's -np decides.
    #[arg(long = "nthreads", env = "NTHREADS", value_name = "N", value_parser = parse_rank_count)]
    pub nthreads: Option<usize>,
}

/// A lesson without options of its own.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct NoArgs {}

/// Parses `NTHREADS`: a whole number of ranks, at least 1.
pub(crate) fn parse_rank_count(text: &str) -> Result<usize, String> {
    let n: usize = text.trim().parse().map_err(|_| {
        format!("'{text}' is not a whole number: NTHREADS is how many ranks (GPUs) to use, e.g. NTHREADS=2")
    })?;
    if n == 0 {
        return Err("NTHREADS must be at least 1: it is how many ranks (GPUs) to use".into());
    }
    Ok(n)
}

#[derive(clap::Parser, Debug)]
pub(crate) struct Cli<A: clap::Args> {
    #[command(flatten)]
    pub launch: LaunchArgs,
    #[command(flatten)]
    pub lesson: A,
}

pub(crate) fn after_help(name: &str) -> String {
    format!(
        "Launch modes:
  threads (default build)   NTHREADS=2 cargo run --release --bin {name}
  MPI (--features mpi)      cargo build --release --features mpi
                            mpirun -np 2 target/release/{name}

Exit codes: 0 verified, 1 failed, 2 cannot run on this system (the message says why)."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    fn parse(args: &[&str]) -> Result<Cli<NoArgs>, clap::Error> {
        let matches = Cli::<NoArgs>::command().try_get_matches_from(args)?;
        Cli::<NoArgs>::from_arg_matches(&matches)
    }

    #[test]
    fn rank_count_accepts_positive_whole_numbers() {
        assert_eq!(parse_rank_count("4"), Ok(4));
        assert_eq!(parse_rank_count(" 2 "), Ok(2));
    }

    #[test]
    fn zero_ranks_is_refused_with_a_reason() {
        let err = parse_rank_count("0").unwrap_err();
        assert!(err.contains("at least 1"), "{err}");
    }

    #[test]
    fn non_numbers_are_refused_with_a_reason() {
        for bad in ["abc", "-1", "2.5", ""] {
            let err = parse_rank_count(bad).unwrap_err();
            assert!(err.contains("not a whole number"), "{bad}: {err}");
        }
    }

    #[test]
    fn flag_sets_the_rank_count() {
        let cli = parse(&["lesson", "--nthreads", "3"]).unwrap();
        assert_eq!(cli.launch.nthreads, Some(3));
    }

    #[test]
    fn bad_flag_value_is_a_usage_error() {
        let err = parse(&["lesson", "--nthreads", "0"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(err.to_string().contains("at least 1"), "{err}");
    }
}
