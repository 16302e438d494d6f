//! Command-line options shared by every program, and the parser of sizes
//! (`64K`, `256M`) that lessons and benchmarks use for their own options.

/// Options every lesson takes. Each one can also be set through the
/// environment variable named in `--help`.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchArgs {
    /// Ranks to start as threads of this process, one GPU each [default: every
    /// visible GPU]. Not used in MPI mode, where mpirun's -np decides.
    // allow_negative_numbers: `--nthreads -1` reaches parse_rank_count and gets
    // its message, instead of clap's "unexpected argument '-1'".
    #[arg(
        long = "nthreads",
        env = "NTHREADS",
        value_name = "N",
        value_parser = parse_rank_count,
        allow_negative_numbers = true
    )]
    pub nthreads: Option<usize>,
}

/// The most ranks thread mode starts in one process. Each rank is a thread
/// driving a GPU of its own, and no machine has this many GPUs; the limit
/// turns a typo such as `NTHREADS=100000` into a clear error instead of a
/// hundred thousand threads, which exhausts the process's memory maps and
/// aborts it (Rust cannot even set up their stack guard pages).
pub const MAX_THREAD_RANKS: usize = 1024;

/// A lesson without options of its own.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct NoArgs {}

/// `4096`, `4K`, `256M`, `1G`: a size in bytes, suffixes in powers of 1024.
/// The value parser of every option that takes a size (lesson 04's
/// `--size-bytes`, the benchmarks' `-b`/`-e`).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last() {
        Some((at, 'K' | 'k')) => (&text[..at], 1usize << 10),
        Some((at, 'M' | 'm')) => (&text[..at], 1 << 20),
        Some((at, 'G' | 'g')) => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size such as 4096, 64K or 256M"))?;
    match n.checked_mul(unit) {
        Some(0) => Err("a size must be at least 1 byte".into()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("'{text}' is too large")),
    }
}

/// Parses `NTHREADS`: a whole number of ranks, from 1 to [`MAX_THREAD_RANKS`].
pub(crate) fn parse_rank_count(text: &str) -> Result<usize, String> {
    let digits = text.trim();
    let too_many = || {
        format!(
            "NTHREADS must be a positive whole number no larger than {MAX_THREAD_RANKS}; \
             NTHREADS={digits} is more ranks than one process starts \
             (each rank is a thread driving a GPU of its own, and no machine has more GPUs than that); \
             for ranks on several machines, use the MPI build with mpirun"
        )
    };
    match digits.parse::<usize>() {
        Ok(0) => Err("NTHREADS must be a positive whole number, the number of ranks (GPUs) to use; 0 is not positive".into()),
        Ok(n) if n > MAX_THREAD_RANKS => Err(too_many()),
        Ok(n) => Ok(n),
        // Only digits, yet no usize: a number too large even to hold.
        Err(_) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Err(too_many())
        }
        Err(_) => Err(format!(
            "NTHREADS must be a positive whole number, the number of ranks (GPUs) to use, e.g. NTHREADS=2; '{text}' is not one"
        )),
    }
}

/// The message for a bad `NTHREADS` that came from the environment rather
/// than from `--nthreads`: clap would name the flag the user never typed
/// ("invalid value '-1' for '--nthreads <N>'"), so the launcher prints the
/// parser's own message, which the error carries as its source. `None` for
/// every other error.
pub(crate) fn nthreads_from_env_error(
    err: &clap::Error,
    args: &[std::ffi::OsString],
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let arg = match err.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg,
        _ => return None,
    };
    let typed = args.iter().skip(1).any(|a| {
        a.to_str()
            .is_some_and(|a| a == "--nthreads" || a.starts_with("--nthreads="))
    });
    if !arg.starts_with("--nthreads") || typed {
        return None;
    }
    std::error::Error::source(err).map(|reason| reason.to_string())
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
        assert!(err.contains("must be a positive whole number"), "{err}");
        assert!(err.contains("0 is not positive"), "{err}");
    }

    #[test]
    fn non_numbers_are_refused_with_a_reason() {
        for bad in ["abc", "-1", "2.5", "", "+-3"] {
            let err = parse_rank_count(bad).unwrap_err();
            assert!(
                err.contains("must be a positive whole number"),
                "{bad}: {err}"
            );
            assert!(err.contains(&format!("'{bad}' is not one")), "{bad}: {err}");
        }
    }

    #[test]
    fn absurd_rank_counts_are_refused_with_the_limit_and_why() {
        assert_eq!(parse_rank_count("1024"), Ok(MAX_THREAD_RANKS));
        for bad in ["1025", "100000", "99999999999999999999999"] {
            let err = parse_rank_count(bad).unwrap_err();
            assert!(
                err.contains(&format!("NTHREADS={bad} is more ranks")),
                "{err}"
            );
            assert!(
                err.contains("must be a positive whole number no larger than 1024"),
                "{err}"
            );
            assert!(err.contains("a GPU of its own"), "{err}");
        }
    }

    #[test]
    fn a_negative_flag_value_gets_the_same_message() {
        let err = parse(&["lesson", "--nthreads", "-1"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(
            err.to_string().contains("must be a positive whole number"),
            "{err}"
        );
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
        assert!(err.to_string().contains("0 is not positive"), "{err}");
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("0").unwrap_err().contains("at least 1 byte"));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
