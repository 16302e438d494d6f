//! A test hook: make one rank fail, or stall, at a chosen point of a real run.
//!
//! The fault matrix (`docs/src/testing.md`) checks how a run ends when one
//! rank goes wrong before, during or after a collective. The lessons' own code
//! has no such failure to offer, so the tests ask for one through an
//! environment variable, which is never set outside them:
//!
//! ```text
//! SYMMEM_TEST_FAULT=<what>:<rank>:<where>
//!   what   fail    the rank returns an error there
//!          stall   the rank stops there and never goes on, as a hung rank would
//!   rank   the rank that misbehaves
//!   where  init          just before ncclCommInitRank, which the others enter
//!          after:<text>  right after the rank passes the first println_ordered
//!                        line that contains <text>
//! ```
//!
//! For example `SYMMEM_TEST_FAULT=fail:1:after:data initialized` makes rank 1
//! of lesson 02 fail just before the AllReduce, which the others then wait in.

use std::sync::OnceLock;

use anyhow::{anyhow, Result};

use crate::CannotRun;

/// The variable the hook reads.
pub const VARIABLE: &str = "SYMMEM_TEST_FAULT";

#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    Fail,
    Stall,
}

/// Where in the run the hook can fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point<'a> {
    /// Just before `ncclCommInitRank`.
    Init,
    /// Just after `println_ordered` with this line.
    AfterLine(&'a str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Fault {
    what: What,
    rank: usize,
    /// `None`: at `init`; `Some(text)`: after a line containing `text`.
    after: Option<String>,
}

fn parse(spec: &str) -> Result<Fault, String> {
    let usage = || {
        format!(
            "{VARIABLE}={spec:?} is not <fail|stall>:<rank>:<init|after:text>, e.g. fail:1:init"
        )
    };
    let mut parts = spec.splitn(3, ':');
    let (what, rank, place) = (parts.next(), parts.next(), parts.next());
    let what = match what {
        Some("fail") => What::Fail,
        Some("stall") => What::Stall,
        _ => return Err(usage()),
    };
    let rank = rank.and_then(|r| r.parse().ok()).ok_or_else(usage)?;
    let after = match place {
        Some("init") => None,
        Some(place) => match place.strip_prefix("after:") {
            Some(text) if !text.is_empty() => Some(text.to_string()),
            _ => return Err(usage()),
        },
        None => return Err(usage()),
    };
    Ok(Fault { what, rank, after })
}

/// The fault asked for, read once per process.
fn requested() -> &'static Result<Option<Fault>, String> {
    static FAULT: OnceLock<Result<Option<Fault>, String>> = OnceLock::new();
    FAULT.get_or_init(|| match std::env::var(VARIABLE) {
        Ok(spec) if !spec.is_empty() => parse(&spec).map(Some),
        _ => Ok(None),
    })
}

/// Checks the variable before any rank starts: a malformed value is a usage
/// error of the tests, reported once.
pub(crate) fn check_request() -> Result<(), CannotRun> {
    match requested() {
        Ok(_) => Ok(()),
        Err(usage) => Err(CannotRun::new(
            usage.clone(),
            format!("unset {VARIABLE}: it is a test hook (see docs/src/testing.md)"),
        )),
    }
}

/// Rank `rank` reaches `point`: fails or stalls there if the test asked for it.
pub(crate) fn at(rank: usize, point: Point<'_>) -> Result<()> {
    // A malformed request was refused by `check_request` before the ranks started.
    let Ok(Some(fault)) = requested() else {
        return Ok(());
    };
    let here = match (&fault.after, point) {
        (None, Point::Init) => true,
        (Some(text), Point::AfterLine(line)) => line.contains(text.as_str()),
        _ => false,
    };
    if !here || fault.rank != rank {
        return Ok(());
    }
    // The note marks the moment on stderr: the tests time the end from it.
    let spec = std::env::var(VARIABLE).unwrap_or_default();
    match fault.what {
        What::Fail => {
            eprintln!("note: rank {rank} fails here on purpose ({VARIABLE}={spec})");
            Err(anyhow!("injected failure ({VARIABLE}={spec})"))
        }
        What::Stall => {
            eprintln!("note: rank {rank} stalls here on purpose ({VARIABLE}={spec})");
            loop {
                std::thread::park();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_what_which_rank_and_where() {
        assert_eq!(
            parse("fail:1:init"),
            Ok(Fault {
                what: What::Fail,
                rank: 1,
                after: None
            })
        );
        assert_eq!(
            parse("stall:0:after:data initialized: yes"),
            Ok(Fault {
                what: What::Stall,
                rank: 0,
                after: Some("data initialized: yes".into())
            })
        );
        for bad in [
            "",
            "fail",
            "fail:x:init",
            "crash:1:init",
            "fail:1:after:",
            "fail:1:later",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("is not <fail|stall>:<rank>"), "{bad}: {err}");
        }
    }
}
