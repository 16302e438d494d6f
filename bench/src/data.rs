//! The benchmarks' data, written and checked on the GPU by the kernels of
//! `kernels/data.cu`: the AllReduce benchmarks' seeded values, lesson 03's
//! exchange elements (sequences of 64-bit words), and a comparison within a
//! tolerance with expected values already on the GPU (lesson 06's layer).
//!
//! Every timed operation has its own input and output region, and every
//! region is checked (see [`crate::allreduce`]). At 512 MiB a trial of 20
//! operations touches 27 regions of each buffer (7 rounds of 4): 13.5 GiB
//! to draw, copy up, copy back and compare on the host, longer than the
//! trial itself. So the
//! data are drawn and checked where they are, at the GPU's memory speed.
//! The kernels were compiled once to PTX (`kernels/make-ptx`); the driver
//! compiles that PTX for the GPU when [`DataKernels::load`] runs, so the
//! benchmarks need no CUDA toolkit.

use std::ffi::CString;

use anyhow::{Context, Result};
use common::kernel::{self, launch_builder};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream, LaunchConfig};

/// The kernels' source, for the test that checks the PTX was made from it.
pub const SOURCE: &str = include_str!("../kernels/data.cu");
/// `kernels/data.ptx`: `SOURCE` compiled by `kernels/make-ptx`.
pub const PTX: &str = include_str!("../kernels/data.ptx");

/// A NaN, written over every output before it is computed: it equals
/// nothing, so an element the operation did not write cannot pass the check.
pub const POISON: u32 = 0x7fc0_0bad;

/// Threads per block of the data kernels; their grids stride over the data.
const THREADS: u32 = 256;
/// At most this many blocks: enough to keep the memory busy, few enough that
/// a tiny region is not spread over idle blocks.
const MAX_BLOCKS: u64 = 4096;

/// The module of `data.ptx` and its kernels, loaded into the current
/// context, with the two words the check writes its result into.
pub struct DataKernels {
    module: cu_sys::CUmodule,
    fill: cu_sys::CUfunction,
    check: cu_sys::CUfunction,
    spin: cu_sys::CUfunction,
    fill_sequence: cu_sys::CUfunction,
    check_sequence: cu_sys::CUfunction,
    check_close: cu_sys::CUfunction,
    /// `[wrong elements, smallest wrong index]` on the device.
    result: cu_sys::CUdeviceptr,
}

// The handles are plain driver handles, used from the rank's own thread.
unsafe impl Send for DataKernels {}

/// What [`DataKernels::check`] found in one region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    pub wrong: u64,
    /// The first wrong element's index, if any was wrong.
    pub first: Option<u64>,
}

impl DataKernels {
    /// Loads the PTX into the context current on this thread (the rank's GPU).
    pub fn load() -> Result<Self> {
        let ptx = CString::new(PTX).context("data.ptx holds a NUL byte")?;
        // SAFETY: a context is current; `ptx` is NUL-terminated PTX text that
        // outlives the call (the driver compiles it before returning).
        let module = unsafe { cu::module::load_data(ptx.as_ptr().cast()) }
            .context("cuModuleLoadData (the benchmarks' data kernels, data.ptx)")?;
        let function = |name: &str| {
            // SAFETY: the module was just loaded.
            unsafe { cu::module::get_function(module, CString::new(name)?) }
                .with_context(|| format!("cuModuleGetFunction({name})"))
        };
        let (fill, check, spin) = (
            function("fill_input")?,
            function("check_sum")?,
            function("spin")?,
        );
        let (fill_sequence, check_sequence, check_close) = (
            function("fill_sequence")?,
            function("check_sequence")?,
            function("check_close")?,
        );
        let result = unsafe { cu::malloc_sync(16) }.context("cuMemAlloc (the check's result)")?;
        Ok(Self {
            module,
            fill,
            check,
            spin,
            fill_sequence,
            check_sequence,
            check_close,
            result,
        })
    }

    /// Writes `value(seed, rank, i)` for `i < count` at device address `at`.
    pub fn fill(
        &self,
        at: u64,
        count: usize,
        seed: u64,
        rank: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let (count, rank) = (count as u64, rank as u32);
        let mut launch = launch_builder(stream, self.fill);
        launch.arg(&at).arg(&count).arg(&seed).arg(&rank);
        // SAFETY: `at` holds `count` floats (the caller's region); the
        // arguments match fill_input's (float*, u64, u64, u32).
        unsafe { launch.launch(grid(count)) }.context("fill_input")
    }

    /// NaN ([`POISON`]) over `count` floats at `at`.
    pub fn poison(&self, at: u64, count: usize, stream: &CudaStream) -> Result<()> {
        // SAFETY: `at` holds `count` floats; cuMemsetD32 wants 4-byte
        // alignment, which float data has.
        unsafe { cu_sys::cuMemsetD32Async(at, POISON, count, stream.cu_stream()) }
            .result()
            .context("cuMemsetD32Async (poison)")
    }

    /// Counts the floats at `at` that differ from the sum over `ranks` ranks
    /// of `value(seed, r, i)`, in stream order, and waits for the answer.
    pub fn check(
        &self,
        at: u64,
        count: usize,
        seed: u64,
        ranks: usize,
        stream: &CudaStream,
    ) -> Result<Checked> {
        let start = [0u64, u64::MAX];
        // SAFETY: `result` holds two words; `start` is read before the call returns.
        unsafe { cu::memcpy_htod_async(self.result, &start[..], stream.cu_stream()) }
            .context("cuMemcpyHtoDAsync (reset the check)")?;
        let (count_words, ranks) = (count as u64, ranks as u32);
        let mut launch = launch_builder(stream, self.check);
        launch
            .arg(&at)
            .arg(&count_words)
            .arg(&seed)
            .arg(&ranks)
            .arg(&self.result);
        // SAFETY: `at` holds `count` floats; the arguments match check_sum's
        // (const float*, u64, u64, u32, u64*).
        unsafe { launch.launch(grid(count_words)) }.context("check_sum")?;
        let mut found = [0u64; 2];
        // SAFETY: we wait for the stream before reading `found`.
        unsafe { cu::memcpy_dtoh_async(&mut found[..], self.result, stream.cu_stream()) }
            .context("cuMemcpyDtoHAsync (the check's result)")?;
        stream.synchronize().context("wait for the check")?;
        Ok(Checked {
            wrong: found[0],
            first: (found[0] > 0).then_some(found[1]),
        })
    }

    /// Writes `first + step × i` (wrapping) for `i < count` 64-bit words at
    /// device address `at`, in stream order.
    pub fn fill_sequence(
        &self,
        at: u64,
        count: usize,
        (first, step): (u64, u64),
        stream: &CudaStream,
    ) -> Result<()> {
        let count = count as u64;
        let mut launch = launch_builder(stream, self.fill_sequence);
        launch.arg(&at).arg(&count).arg(&first).arg(&step);
        // SAFETY: `at` holds `count` words (the caller's region); the
        // arguments match fill_sequence's (u64*, u64, u64, u64).
        unsafe { launch.launch(grid(count)) }.context("fill_sequence")
    }

    /// Counts the 64-bit words that differ from their sequence, over every
    /// part `(at, count, (first, step))`, in stream order, and waits for the
    /// answer. [`Checked::first`] numbers the words of all the parts one
    /// after the other, in the order given.
    pub fn check_sequences(
        &self,
        parts: &[(u64, usize, (u64, u64))],
        stream: &CudaStream,
    ) -> Result<Checked> {
        let start = [0u64, u64::MAX];
        // SAFETY: `result` holds two words; `start` is read before the call returns.
        unsafe { cu::memcpy_htod_async(self.result, &start[..], stream.cu_stream()) }
            .context("cuMemcpyHtoDAsync (reset the check)")?;
        let mut base = 0u64;
        for &(at, count, (first, step)) in parts {
            let count = count as u64;
            if count > 0 {
                let mut launch = launch_builder(stream, self.check_sequence);
                launch
                    .arg(&at)
                    .arg(&count)
                    .arg(&first)
                    .arg(&step)
                    .arg(&base)
                    .arg(&self.result);
                // SAFETY: `at` holds `count` words; the arguments match
                // check_sequence's (const u64*, u64, u64, u64, u64, u64*).
                unsafe { launch.launch(grid(count)) }.context("check_sequence")?;
            }
            base += count;
        }
        let mut found = [0u64; 2];
        // SAFETY: we wait for the stream before reading `found`.
        unsafe { cu::memcpy_dtoh_async(&mut found[..], self.result, stream.cu_stream()) }
            .context("cuMemcpyDtoHAsync (the check's result)")?;
        stream.synchronize().context("wait for the check")?;
        Ok(Checked {
            wrong: found[0],
            first: (found[0] > 0).then_some(found[1]),
        })
    }

    /// Counts the elements that are not [`close`] to what is expected, over
    /// every part `(got, want, count)`: `count` elements at device address
    /// `got` (float32, or bfloat16 with `bf16`) against as many float32 at
    /// `want`, within `tolerance` (0: exactly). In stream order; waits for
    /// the answer. [`Checked::first`] numbers the elements of all the parts
    /// one after the other, in the order given.
    pub fn check_close(
        &self,
        parts: &[(u64, u64, usize)],
        bf16: bool,
        tolerance: f32,
        stream: &CudaStream,
    ) -> Result<Checked> {
        let start = [0u64, u64::MAX];
        // SAFETY: `result` holds two words; `start` is read before the call returns.
        unsafe { cu::memcpy_htod_async(self.result, &start[..], stream.cu_stream()) }
            .context("cuMemcpyHtoDAsync (reset the check)")?;
        let (bf16, mut base) = (u32::from(bf16), 0u64);
        for &(got, want, count) in parts {
            let count = count as u64;
            if count > 0 {
                let mut launch = launch_builder(stream, self.check_close);
                launch
                    .arg(&got)
                    .arg(&want)
                    .arg(&count)
                    .arg(&bf16)
                    .arg(&tolerance)
                    .arg(&base)
                    .arg(&self.result);
                // SAFETY: `got` and `want` hold `count` elements; the
                // arguments match check_close's (const void*, const float*,
                // u64, u32, float, u64, u64*).
                unsafe { launch.launch(grid(count)) }.context("check_close")?;
            }
            base += count;
        }
        let mut found = [0u64; 2];
        // SAFETY: we wait for the stream before reading `found`.
        unsafe { cu::memcpy_dtoh_async(&mut found[..], self.result, stream.cu_stream()) }
            .context("cuMemcpyDtoHAsync (the check's result)")?;
        stream.synchronize().context("wait for the check")?;
        Ok(Checked {
            wrong: found[0],
            first: (found[0] > 0).then_some(found[1]),
        })
    }

    /// Before anything is timed: the sequence and closeness checks pass on
    /// right data and fail, at the right element, on one wrong element, in
    /// both widths a layer's output has. A check that cannot fail would
    /// prove nothing. (`check_sum` has its own, in `allreduce::Sweep`.)
    pub fn self_test_checks(&self, stream: &CudaStream) -> Result<()> {
        const N: usize = 1024;
        let scratch = Scratch::new(3 * 8 * N, stream)?;
        let (words, want, got) = (
            scratch.at,
            scratch.at + 8 * N as u64,
            scratch.at + 16 * N as u64,
        );
        // Sequences: two parts laid one after the other, as the exchange's blocks are.
        let first = 0x0001_0002_0000_0000u64;
        self.fill_sequence(words, N, (first, 1), stream)?;
        let parts = [
            (words, 1000, (first, 1)),
            (words + 8000, N - 1000, (first + 1000, 1)),
        ];
        let clean = self.check_sequences(&parts, stream)?;
        anyhow::ensure!(
            clean.wrong == 0,
            "check_sequence finds {} wrong words in right data",
            clean.wrong
        );
        self.fill_sequence(words + 8 * 1017, 1, (u64::MAX, 0), stream)?;
        let spoiled = self.check_sequences(&parts, stream)?;
        anyhow::ensure!(
            spoiled.wrong == 1 && spoiled.first == Some(1017),
            "check_sequence misses a wrong word: {spoiled:?}"
        );
        // Closeness: float32 within a tolerance, bfloat16 exactly; values
        // exact in bfloat16, so both widths hold the same numbers.
        let values: Vec<f32> = (0..N).map(|i| (i % 64) as f32 * 0.25 - 4.0).collect();
        let mut outputs = values.clone();
        outputs[700] += 1e-6;
        let halves: Vec<u16> = values.iter().map(|v| (v.to_bits() >> 16) as u16).collect();
        // SAFETY: `want` and `got` hold N floats each; the copies are
        // stream-ordered and waited for by the checks below.
        unsafe {
            cu::memcpy_htod_async(want, &values[..], stream.cu_stream())?;
            cu::memcpy_htod_async(got, &outputs[..], stream.cu_stream())?;
        }
        let close = self.check_close(&[(got, want, N)], false, 1e-5, stream)?;
        let exact = self.check_close(&[(got, want, N)], false, 0.0, stream)?;
        anyhow::ensure!(
            close.wrong == 0 && exact.wrong == 1 && exact.first == Some(700),
            "check_close (float32): {close:?} within 1e-5, {exact:?} exactly"
        );
        let mut spoiled = halves.clone();
        spoiled[333] = 0x7fc0;
        // SAFETY: `got` holds N floats, room for N bfloat16 values.
        unsafe { cu::memcpy_htod_async(got, &halves[..], stream.cu_stream()) }?;
        let clean = self.check_close(&[(got, want, N)], true, 0.0, stream)?;
        // SAFETY: as above.
        unsafe { cu::memcpy_htod_async(got, &spoiled[..], stream.cu_stream()) }?;
        let nan = self.check_close(&[(got, want, N)], true, 1.0, stream)?;
        anyhow::ensure!(
            clean.wrong == 0 && nan.wrong == 1 && nan.first == Some(333),
            "check_close (bfloat16): {clean:?} on right data, {nan:?} with a NaN"
        );
        Ok(())
    }

    /// One thread spins for `nanoseconds` on the GPU's clock, in stream order.
    pub fn spin(&self, nanoseconds: u64, stream: &CudaStream) -> Result<()> {
        let mut launch = launch_builder(stream, self.spin);
        launch.arg(&nanoseconds);
        // SAFETY: spin takes one u64.
        unsafe { launch.launch(kernel::grid(1, 1)) }.context("spin")
    }
}

impl Drop for DataKernels {
    fn drop(&mut self) {
        // SAFETY: allocated and loaded in `load`, not used after this.
        unsafe {
            if let Err(err) = cu::free_sync(self.result) {
                eprintln!("warning: cleanup: cuMemFree: {err}");
            }
            if let Err(err) = cu::module::unload(self.module) {
                eprintln!("warning: cleanup: cuModuleUnload: {err}");
            }
        }
    }
}

/// Device memory for a self-test, from the stream-ordered allocator and
/// freed on the stream when dropped: unlike cuMemFree, nothing here waits
/// for the whole context, which ranks that share a GPU in thread mode
/// share (a peer's kernel may be waiting for this rank).
struct Scratch {
    at: u64,
    stream: cu_sys::CUstream,
}

impl Scratch {
    fn new(bytes: usize, stream: &CudaStream) -> Result<Self> {
        let stream = stream.cu_stream();
        // SAFETY: the stream is live for the self-test, which drops this first.
        let at =
            unsafe { cu::malloc_async(stream, bytes) }.context("cuMemAllocAsync (self-test)")?;
        Ok(Self { at, stream })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` on this stream; freed after its work.
        if let Err(err) = unsafe { cu::free_async(self.at, self.stream) } {
            eprintln!("warning: cleanup: cuMemFreeAsync: {err}");
        }
    }
}

/// Is `got` within `tolerance × max(|want|, 1)` of `want`? What the
/// `check_close` kernel asks of every element, in the same float32
/// operations (a NaN is never close; tolerance 0 asks for the exact value).
pub fn close(got: f32, want: f32, tolerance: f32) -> bool {
    let bound = tolerance * want.abs().max(1.0);
    (got - want).abs() <= bound
}

/// The grid for `count` elements: one block of `THREADS` threads per
/// `THREADS` elements, at most `MAX_BLOCKS` blocks.
fn grid(count: u64) -> LaunchConfig {
    kernel::grid(blocks(count), THREADS)
}

/// Blocks for `count` elements: one per `THREADS` elements, at most `MAX_BLOCKS`.
fn blocks(count: u64) -> u32 {
    count.div_ceil(u64::from(THREADS)).clamp(1, MAX_BLOCKS) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn the_ptx_was_made_from_the_source_as_it_is() {
        let recorded = PTX
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("// data.cu sha256 "))
            .expect("data.ptx starts with the sha256 of data.cu");
        let actual: String = Sha256::digest(SOURCE.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(
            recorded, actual,
            "data.cu changed since data.ptx was made: run bench/kernels/make-ptx"
        );
    }

    #[test]
    fn the_ptx_loads_on_every_cuda_12_3_driver() {
        // NVRTC 12.3 writes ISA 8.3; a newer NVRTC writes what older drivers refuse.
        assert!(
            PTX.contains("\n.version 8.3\n"),
            "regenerate with make-ptx (NVRTC 12.3)"
        );
        assert!(PTX.contains("\n.target sm_70\n"));
        for kernel in [
            "fill_input",
            "check_sum",
            "spin",
            "fill_sequence",
            "check_sequence",
            "check_close",
        ] {
            assert!(
                PTX.contains(&format!(".entry {kernel}(")),
                "{kernel} is in data.ptx"
            );
        }
    }

    #[test]
    fn close_is_within_a_relative_bound_and_never_nan() {
        assert!(close(1.0, 1.0, 0.0));
        assert!(!close(1.0 + f32::EPSILON, 1.0, 0.0), "tolerance 0 is exact");
        assert!(close(100.0 + 1e-3, 100.0, 1e-5), "relative to |want|");
        assert!(!close(100.0 + 2e-3, 100.0, 1e-5));
        assert!(close(1e-6, 0.0, 1e-5), "absolute near zero");
        assert!(!close(f32::NAN, 1.0, 1.0));
        assert!(!close(f32::from_bits(POISON), 0.0, f32::INFINITY));
    }

    #[test]
    fn grids_cover_small_and_large_regions() {
        assert_eq!(blocks(0), 1);
        assert_eq!(blocks(2), 1);
        assert_eq!(blocks(257), 2);
        assert_eq!(blocks(10 << 30), MAX_BLOCKS as u32);
        assert_eq!(grid(257).grid_dim, (2, 1, 1));
        assert_eq!(grid(257).block_dim, (THREADS, 1, 1));
    }
}
