//! The Triton binding: `symm_all_reduce` as an extern function for Triton
//! kernels (`triton/symm.py`) and the library it links, NCCL backend, as
//! LLVM bitcode (`triton/symm_comm_nccl.bc`, made by `triton/build-bitcode`
//! with clang 20+ against NCCL 2.32.3's headers).
//!
//! A host that compiles a Triton kernel which calls `symm_all_reduce` writes
//! [`SCRIPT`] and [`BITCODE`] beside the kernel's script ([`write_beside`]),
//! and gives Triton `extern_libs(nccl_device_bc)` from `symm.py`: this
//! library first, then NCCL's own `libnccl_device.bc`.

use std::path::Path;

use anyhow::{Context, Result};
use common::NcclVersion;

/// `triton/symm.py`: `symm_all_reduce` for Triton kernels and `extern_libs`.
pub const SCRIPT: &str = include_str!("../triton/symm.py");
/// The library as LLVM bitcode (`triton/symm_comm_nccl.bc`).
pub const BITCODE: &[u8] = include_bytes!("../triton/symm_comm_nccl.bc");
/// What the bitcode was built from (`triton/symm_comm_nccl.txt`).
pub const RECORD: &str = include_str!("../triton/symm_comm_nccl.txt");

/// The NCCL release whose headers the bitcode was built against: the device
/// communicator's layout is that release's, so the loaded NCCL (which makes
/// the communicator and whose `libnccl_device.bc` is linked) must be it.
pub const NCCL: NcclVersion = NcclVersion::new(2, 32, 3);

/// Writes `symm.py` and `symm_comm_nccl.bc` into `dir`, where a kernel
/// script beside them imports `symm`.
pub fn write_beside(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("symm.py"), SCRIPT).context("write symm.py")?;
    std::fs::write(dir.join("symm_comm_nccl.bc"), BITCODE).context("write symm_comm_nccl.bc")
}

#[cfg(test)]
mod tests {
    use super::*;
    use device_build::cache::sha256_hex as sha;

    fn recorded(name: &str) -> String {
        let prefix = format!("sha256 {name}: ");
        RECORD
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("symm_comm_nccl.txt records no {name}"))
            .to_string()
    }

    #[test]
    fn the_bitcode_was_built_from_these_sources() {
        // Fails when symm_comm.cuh or symm_triton.cu changed and
        // triton/build-bitcode was not run again.
        assert_eq!(
            recorded("../kernels/symm_comm.cuh"),
            sha(crate::HEADER.as_bytes()),
            "symm_comm.cuh changed since the bitcode was built: run symm_comm/triton/build-bitcode"
        );
        assert_eq!(
            recorded("symm_triton.cu"),
            sha(include_bytes!("../triton/symm_triton.cu")),
            "symm_triton.cu changed since the bitcode was built: run symm_comm/triton/build-bitcode"
        );
        assert_eq!(recorded("symm_comm_nccl.bc"), sha(BITCODE));
        assert!(RECORD.contains(&format!("nccl: {NCCL}\n")));
        // LLVM bitcode starts with 'BC' 0xC0DE.
        assert_eq!(&BITCODE[..4], b"BC\xc0\xde");
    }
}
