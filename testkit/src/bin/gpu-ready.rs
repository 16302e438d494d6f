//! `gpu-ready`: exits 0 when a new process can use every visible GPU (a
//! context, a small allocation, a memset, a synchronize), 1 with the error
//! otherwise. The fault cases run it after a job whose MPI ranks shared a
//! GPU through MPS (see `testkit::fault_case`).

use std::process::ExitCode;

use cudarc::driver::{result, CudaContext};

fn main() -> ExitCode {
    // Without a driver library cudarc would panic at its first call.
    if let Err(e) = common::preflight::probe_driver() {
        eprintln!("gpu-ready: {}", e.reason);
        return ExitCode::FAILURE;
    }
    let probe = || -> Result<usize, cudarc::driver::DriverError> {
        result::init()?;
        let gpus = result::device::get_count()? as usize;
        for device in 0..gpus {
            let ctx = CudaContext::new(device)?;
            let stream = ctx.default_stream();
            let word = stream.alloc_zeros::<u32>(1)?;
            stream.synchronize()?;
            drop(word);
        }
        Ok(gpus)
    };
    match probe() {
        Ok(gpus) => {
            println!("gpu-ready: {gpus} GPU(s) usable");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gpu-ready: {e:?}");
            ExitCode::FAILURE
        }
    }
}
