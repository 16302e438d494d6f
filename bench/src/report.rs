//! What a benchmark prints and writes: the table in nccl-tests' column
//! layout, a side-by-side summary, `--json` and `--svg`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{size_label, Collective, Sample, SweepArgs};
use common::RankContext;

/// One size of one series: out of place, and in place where the operation has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub bytes: usize,
    /// Elements per rank, as nccl-tests' `count` column.
    pub count: usize,
    pub out_of_place: Sample,
    pub in_place: Option<Sample>,
}

/// One line of the plot and one table: a registration mode or a kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Short, e.g. `-R 2` or `fast`.
    pub name: String,
    /// What it is, e.g. `ncclAllReduce on symmetric windows`.
    pub about: String,
    /// Its data type in nccl-tests' spelling (`bfloat16`), where it is not
    /// the report's: lesson 06 times bfloat16 layer tails beside float32
    /// AllReduces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<String>,
    pub rows: Vec<Row>,
}

impl Series {
    /// This series' data type: its own, or the report's.
    pub fn datatype<'a>(&'a self, report: &'a Report) -> &'a str {
        self.datatype.as_deref().unwrap_or(&report.datatype)
    }
}

/// Where and how the numbers were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `cuDeviceGetName` of rank 0's GPU.
    pub device: String,
    pub driver: String,
    pub nccl_version: String,
    pub nccl_path: String,
    pub ranks: usize,
    /// The most ranks that shared one GPU (`RankContext::ranks_per_gpu`):
    /// 1 when each rank had its own. Reports written before this field
    /// existed read as 1.
    #[serde(default = "one")]
    pub ranks_per_gpu: usize,
    /// `threads` or `mpi`.
    pub launch: String,
    pub host: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
}

fn one() -> usize {
    1
}

impl Machine {
    /// This run's machine: rank 0's GPU, the driver, the NCCL in use, the launch mode.
    pub fn describe(
        ctx: &RankContext,
        gpu: &std::sync::Arc<cudarc::driver::CudaContext>,
    ) -> Result<Self> {
        let nccl = common::nccl::loaded_nccl()?;
        let driver =
            common::preflight::probe_driver().map_err(|e| anyhow::anyhow!("{}", e.reason))?;
        Ok(Self {
            device: gpu.name().context("cuDeviceGetName")?,
            driver: driver.version_text(),
            nccl_version: nccl.version.to_string(),
            nccl_path: nccl.path.display().to_string(),
            ranks: ctx.size(),
            ranks_per_gpu: ctx.ranks_per_gpu(),
            launch: common::launch_mode().into(),
            host: host_name(),
            date: utc_now(),
        })
    }
}

/// Everything a benchmark run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub benchmark: String,
    pub collective: Collective,
    pub datatype: String,
    pub redop: String,
    pub machine: Machine,
    pub options: SweepArgs,
    pub series: Vec<Series>,
}

impl Report {
    /// Wrong elements over every row of every series.
    pub fn wrong(&self) -> u64 {
        self.series
            .iter()
            .flat_map(|s| &s.rows)
            .map(|r| r.out_of_place.wrong + r.in_place.map_or(0, |s| s.wrong))
            .sum()
    }

    /// The tables: one per series in nccl-tests' layout, then, with more
    /// than one series, out-of-place time and busbw side by side.
    pub fn table(&self) -> String {
        let m = &self.machine;
        let o = &self.options;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {}: {} of {} ({}), {} rank{} ({}), {}",
            self.benchmark,
            self.collective_name(),
            self.datatypes(),
            self.redop,
            m.ranks,
            common::plural(m.ranks),
            m.launch,
            m.device
        );
        let _ = writeln!(
            out,
            "# NCCL {} ({}), driver {}, {} on {}",
            m.nccl_version, m.nccl_path, m.driver, m.date, m.host
        );
        if let Some(line) = shared_gpu_line(m.ranks_per_gpu) {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(
            out,
            "# minBytes {} maxBytes {} step: {}(factor) warmup iters: {} iters: {} trials: {} (median) time: {}",
            o.min_bytes,
            o.max_bytes,
            o.factor,
            o.warmup,
            o.iters,
            o.trials,
            if o.slowest { "slowest rank" } else { "average over ranks" }
        );
        for series in &self.series {
            let _ = writeln!(out, "#\n# {}: {}", series.name, series.about);
            out.push_str(&nccl_tests_header());
            for row in &series.rows {
                out.push_str(&nccl_tests_line(row, series.datatype(self), &self.redop));
            }
        }
        if self.series.len() > 1 {
            out.push_str(&self.side_by_side());
        }
        out
    }

    /// The series' data types, each once, in order: `float`, or `float and
    /// bfloat16`.
    fn datatypes(&self) -> String {
        let mut seen: Vec<&str> = Vec::new();
        for series in &self.series {
            let datatype = series.datatype(self);
            if !seen.contains(&datatype) {
                seen.push(datatype);
            }
        }
        if seen.is_empty() {
            seen.push(&self.datatype);
        }
        seen.join(" and ")
    }

    fn collective_name(&self) -> String {
        format!("{:?}", self.collective)
    }

    /// Out-of-place time (µs) and busbw (GB/s) of every series, per size.
    fn side_by_side(&self) -> String {
        let mut out = String::from("#\n# out-of-place, side by side: time (us) / busbw (GB/s)\n");
        let mut header = format!("# {:>10}", "size");
        for s in &self.series {
            let _ = write!(header, "  {:>17}", truncate(&s.name, 17));
        }
        out.push_str(&header);
        out.push('\n');
        let rows = self.series.first().map_or(0, |s| s.rows.len());
        for i in 0..rows {
            let bytes = self.series[0].rows[i].bytes;
            let mut line = format!("{:>12}", size_label(bytes));
            for s in &self.series {
                match s.rows.get(i) {
                    Some(r) => {
                        let _ = write!(
                            line,
                            "  {:>8} / {:>6}",
                            float(r.out_of_place.time_us, 8),
                            float(r.out_of_place.busbw, 6)
                        );
                    }
                    None => line.push_str(&format!("  {:>17}", "-")),
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// Rank 0 prints the table and writes the files the options ask for.
    pub fn publish(&self, ctx: &RankContext) -> Result<()> {
        if !ctx.is_root() {
            return Ok(());
        }
        print!("{}", self.table());
        if let Some(path) = &self.options.json {
            self.write_json(path)?;
            eprintln!("note: wrote {}", path.display());
        }
        if let Some(path) = &self.options.svg {
            self.write_svg(path)?;
            eprintln!("note: wrote {}", path.display());
        }
        Ok(())
    }

    /// Collective: fails on every rank (exit 1) if rank 0's report counted a
    /// wrong element. Call it last, after the resources are released.
    pub fn fail_on_wrong(&self, ctx: &RankContext) -> Result<()> {
        let wrong = if ctx.is_root() { self.wrong() } else { 0 };
        ctx.all_ok(if wrong > 0 {
            Err(anyhow::anyhow!("{wrong} elements were wrong (see #wrong)"))
        } else {
            Ok(())
        })
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).context("serialize the report")?;
        std::fs::write(path, text + "\n").with_context(|| format!("write {}", path.display()))
    }

    pub fn read_json(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
    }

    /// Two panels: busbw against size, and time against size (both sizes on
    /// a log scale, time too), one line per series, out of place.
    pub fn write_svg(&self, path: &Path) -> Result<()> {
        use plotters::prelude::*;

        let plot = || -> Result<(), Box<dyn std::error::Error>> {
            let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
            root.fill(&WHITE)?;
            let m = &self.machine;
            let title = format!(
                "{}: {} rank{} ({}), {}, NCCL {}, {}",
                self.benchmark,
                m.ranks,
                common::plural(m.ranks),
                m.launch,
                m.device,
                m.nccl_version,
                m.date
            );
            let root = root.titled(&title, ("sans-serif", 18))?;
            let (left, right) = root.split_horizontally(600);
            let points = |value: fn(&Sample) -> f64| -> Vec<Vec<(f64, f64)>> {
                self.series
                    .iter()
                    .map(|s| {
                        s.rows
                            .iter()
                            .map(|r| (r.bytes as f64, value(&r.out_of_place)))
                            .collect()
                    })
                    .collect()
            };
            let (busbw, time) = (points(|s| s.busbw), points(|s| s.time_us));
            let all =
                |lines: &[Vec<(f64, f64)>]| lines.iter().flatten().copied().collect::<Vec<_>>();
            let (xs_min, xs_max) = range(all(&busbw).iter().map(|p| p.0));
            let (_, bw_max) = range(all(&busbw).iter().map(|p| p.1));
            let (t_min, t_max) = range(all(&time).iter().map(|p| p.1));

            let mut chart = ChartBuilder::on(&left)
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(56)
                .caption("bus bandwidth (out of place)", ("sans-serif", 16))
                .build_cartesian_2d(
                    (xs_min..xs_max * 1.05).log_scale(),
                    0.0..(bw_max * 1.1).max(1.0),
                )?;
            chart
                .configure_mesh()
                .x_desc("size (bytes)")
                .y_desc("busbw (GB/s)")
                .x_label_formatter(&|x| si_label(*x))
                .draw()?;
            self.draw_lines(&mut chart, &busbw)?;

            let mut chart = ChartBuilder::on(&right)
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(56)
                .caption("time per operation (out of place)", ("sans-serif", 16))
                .build_cartesian_2d(
                    (xs_min..xs_max * 1.05).log_scale(),
                    (t_min * 0.8..t_max * 1.25).log_scale(),
                )?;
            chart
                .configure_mesh()
                .x_desc("size (bytes)")
                .y_desc("time (us)")
                .x_label_formatter(&|x| si_label(*x))
                .draw()?;
            self.draw_lines(&mut chart, &time)?;
            root.present()?;
            Ok(())
        };
        plot().map_err(|err| anyhow::anyhow!("draw {}: {err}", path.display()))
    }
}

/// Distinct, print-friendly line colours (matplotlib's "tab10").
fn series_color(i: usize) -> plotters::style::RGBAColor {
    const TAB10: [(u8, u8, u8); 8] = [
        (31, 119, 180),
        (214, 39, 40),
        (44, 160, 44),
        (148, 103, 189),
        (255, 127, 14),
        (140, 86, 75),
        (227, 119, 194),
        (23, 190, 207),
    ];
    let (r, g, b) = TAB10[i % TAB10.len()];
    use plotters::style::Color;
    plotters::style::RGBColor(r, g, b).to_rgba()
}

/// An axis label for a byte count on a log scale: 10, 1k, 100k, 10M, 1G.
fn si_label(bytes: f64) -> String {
    const UNITS: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (unit, suffix) in UNITS {
        if bytes >= unit {
            return format!("{}{suffix}", (bytes / unit).round());
        }
    }
    format!("{}", bytes.round())
}

impl Report {
    /// One line per series on `chart`, with its legend entry.
    fn draw_lines<'a, DB, Y>(
        &self,
        chart: &mut plotters::chart::ChartContext<
            'a,
            DB,
            plotters::coord::cartesian::Cartesian2d<plotters::coord::combinators::LogCoord<f64>, Y>,
        >,
        lines: &[Vec<(f64, f64)>],
    ) -> Result<(), Box<dyn std::error::Error + 'a>>
    where
        DB: plotters::prelude::DrawingBackend + 'a,
        Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    {
        use plotters::prelude::*;
        for (i, (series, line)) in self.series.iter().zip(lines).enumerate() {
            let color = series_color(i);
            chart
                .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))?
                .label(series.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

/// The smallest and largest of `values` (1.0 and 2.0 for none).
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi == 0.0 {
        (1.0, 2.0)
    } else {
        (lo, hi)
    }
}

fn truncate(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

/// nccl-tests' `getFloatStr`: two decimals, then fewer, to fit `width`.
pub fn float(value: f64, width: usize) -> String {
    for decimals in [2, 1, 0] {
        let text = format!("{value:>width$.decimals$}");
        if text.len() <= width {
            return text;
        }
    }
    format!("{value:>width$.1e}")
}

/// The line every benchmark prints when ranks shared a GPU (`ranks_per_gpu`
/// above 1): what its times are not.
pub fn shared_gpu_line(ranks_per_gpu: usize) -> Option<String> {
    (ranks_per_gpu > 1).then(|| {
        format!(
            "# up to {ranks_per_gpu} ranks shared each GPU: every transfer stayed in one GPU's memory, \
             and the ranks shared its multiprocessors and memory bandwidth; these are not NVLink times"
        )
    })
}

/// nccl-tests' three header lines.
pub fn nccl_tests_header() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
        "", "", "", "", ""
    );
    let _ = writeln!(
        out,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"
    );
    let _ = writeln!(
        out,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
    );
    out
}

/// One row in nccl-tests' layout; an operation with no in-place form gets N/A there.
pub fn nccl_tests_line(row: &Row, datatype: &str, redop: &str) -> String {
    let sample = |s: &Sample| {
        format!(
            "  {:>7}  {:>6}  {:>6}  {:>6}",
            float(s.time_us, 7),
            float(s.algbw, 6),
            float(s.busbw, 6),
            s.wrong
        )
    };
    let in_place = row.in_place.as_ref().map_or_else(
        || format!("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A"),
        sample,
    );
    format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n",
        row.bytes,
        row.count,
        datatype,
        redop,
        -1,
        sample(&row.out_of_place),
        in_place
    )
}

/// UTC now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_text(secs)
}

/// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
pub fn utc_text(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// This machine's host name, or `?`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn example() -> Report {
        let sample = |t: f64, bytes: usize| Sample::new(bytes, t * 1e-6, 1.0, 0);
        let rows = |scale: f64| {
            [8usize, 32 << 10, 2 << 20, 128 << 20]
                .iter()
                .map(|&b| Row {
                    bytes: b,
                    count: b / 4,
                    out_of_place: sample(scale * (6.0 + b as f64 / 300e3), b),
                    in_place: Some(sample(scale * (6.5 + b as f64 / 300e3), b)),
                })
                .collect()
        };
        Report {
            benchmark: "02_allreduce_bench".into(),
            collective: Collective::AllReduce,
            datatype: "float".into(),
            redop: "sum".into(),
            machine: Machine {
                device: "NVIDIA H200".into(),
                driver: "13.0".into(),
                nccl_version: "2.28.3".into(),
                nccl_path: "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3".into(),
                ranks: 2,
                ranks_per_gpu: 1,
                launch: "threads".into(),
                host: "gpu".into(),
                date: "2026-11-22T12:00:00Z".into(),
            },
            options: SweepArgs {
                min_bytes: 8,
                max_bytes: 128 << 20,
                factor: 2,
                iters: 20,
                warmup: 5,
                trials: 5,
                slowest: false,
                json: None,
                svg: None,
            },
            series: vec![
                Series {
                    name: "-R 0".into(),
                    about: "ncclAllReduce, buffers not registered".into(),
                    datatype: None,
                    rows: rows(1.5),
                },
                Series {
                    name: "-R 2".into(),
                    about: "ncclAllReduce on symmetric windows".into(),
                    datatype: None,
                    rows: rows(1.0),
                },
            ],
        }
    }

    #[test]
    fn rows_line_up_with_nccl_tests_columns() {
        let report = example();
        let line = nccl_tests_line(&report.series[0].rows[3], "float", "sum");
        // nccl-tests: "%12li  %12li  %8s  %6s  %6s" then "  %7s  %6s  %6s  %6g" twice.
        assert_eq!(
            line,
            "   134217728      33554432     float     sum      -1   680.09  197.35  197.35       0   680.84  197.14  197.14       0\n"
        );
        let header = nccl_tests_header();
        let columns: Vec<&str> = header.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            columns,
            [
                "#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                "time", "algbw", "busbw", "#wrong"
            ]
        );
        // Every column of the header ends where the row's value ends.
        let ends = |text: &str| -> Vec<usize> {
            let b = text.as_bytes();
            (1..b.len())
                .filter(|&i| b[i - 1] != b' ' && b[i] == b' ')
                .collect()
        };
        assert_eq!(ends(header.lines().nth(1).unwrap())[1..], ends(&line)[..]);
        let no_in_place = Row {
            in_place: None,
            ..report.series[0].rows[0].clone()
        };
        assert!(nccl_tests_line(&no_in_place, "uint64", "none")
            .ends_with("     N/A     N/A     N/A     N/A\n"));
    }

    #[test]
    fn floats_shrink_to_fit_like_nccl_tests() {
        assert_eq!(float(10.78, 7), "  10.78");
        assert_eq!(float(3281.4, 7), "3281.40");
        assert_eq!(float(12345.67, 7), "12345.7");
        assert_eq!(float(1234567.0, 7), "1234567");
        assert_eq!(float(0.0, 6), "  0.00");
        assert_eq!(float(341.25, 6), "341.25");
    }

    #[test]
    fn the_table_has_one_block_per_series_and_a_summary() {
        let table = example().table();
        assert!(
            table.contains("# -R 0: ncclAllReduce, buffers not registered"),
            "{table}"
        );
        assert!(
            table.contains("# -R 2: ncclAllReduce on symmetric windows"),
            "{table}"
        );
        assert_eq!(
            table
                .matches("out-of-place                       in-place")
                .count(),
            2
        );
        assert!(table.contains("# out-of-place, side by side"), "{table}");
        let summary = table.split("side by side").nth(1).unwrap();
        assert!(
            summary.contains("        128M    680.09 / 197.35    453.39 / 296.03"),
            "{summary}"
        );
        assert!(table.contains("time: average over ranks"));
    }

    #[test]
    fn a_series_of_another_data_type_says_so_in_its_rows_and_the_header() {
        let mut report = example();
        assert!(report.table().contains(": AllReduce of float (sum)"));
        report.series[1].datatype = Some("bfloat16".into());
        let table = report.table();
        assert!(
            table.contains(": AllReduce of float and bfloat16 (sum)"),
            "{table}"
        );
        let series = table.split_once("# -R 0:").unwrap().1;
        let (first, second) = series.split_once("# -R 2:").unwrap();
        assert!(first.contains("     float     sum") && !first.contains("bfloat16"));
        assert!(second.contains("  bfloat16     sum") && !second.contains(" float "));
        // Reports written before the field existed still parse.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        example().write_json(&path).unwrap();
        let old = std::fs::read_to_string(&path).unwrap();
        assert!(!old.contains("\"datatype\": null"), "absent, not null");
        let text = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.series[1].datatype.as_deref(), Some("bfloat16"));
        assert_eq!(back.series[0].datatype, None);
    }

    #[test]
    fn json_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.json");
        let report = example();
        report.write_json(&path).unwrap();
        assert_eq!(Report::read_json(&path).unwrap(), report);
        let text = std::fs::read_to_string(&path).unwrap();
        for key in [
            "\"device\"",
            "\"driver\"",
            "\"nccl_version\"",
            "\"nccl_path\"",
            "\"ranks\"",
            "\"ranks_per_gpu\"",
            "\"launch\"",
            "\"date\"",
            "\"options\"",
            "\"rows\"",
        ] {
            assert!(text.contains(key), "{key} missing from\n{text}");
        }
    }

    #[test]
    fn ranks_that_shared_a_gpu_are_recorded_and_said() {
        let mut report = example();
        assert!(!report.table().contains("not NVLink times"));
        report.machine.ranks_per_gpu = 2;
        let table = report.table();
        assert!(
            table.contains("# up to 2 ranks shared each GPU: ")
                && table.contains("these are not NVLink times"),
            "{table}"
        );
        // A report from before the field existed: one rank per GPU.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        let text = serde_json::to_string(&example()).unwrap();
        std::fs::write(&path, text.replace("\"ranks_per_gpu\":1,", "")).unwrap();
        let old = Report::read_json(&path).unwrap();
        assert_eq!(old.machine.ranks_per_gpu, 1);
    }

    #[test]
    fn the_svg_is_written_and_names_every_series() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.svg");
        example().write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        for name in ["-R 0", "-R 2", "busbw (GB/s)", "time (us)", "NVIDIA H200"] {
            assert!(svg.contains(name), "{name} missing from the plot");
        }
        assert!(
            svg.matches("<polyline").count() >= 4,
            "two lines in each of two panels"
        );
    }

    #[test]
    fn wrong_elements_are_summed_over_series_and_placements() {
        let mut report = example();
        assert_eq!(report.wrong(), 0);
        report.series[1].rows[2].out_of_place.wrong = 3;
        report.series[0].rows[0].in_place.as_mut().unwrap().wrong = 4;
        assert_eq!(report.wrong(), 7);
    }

    #[test]
    fn axis_labels_use_si_prefixes() {
        assert_eq!(si_label(10.0), "10");
        assert_eq!(si_label(1000.0), "1k");
        assert_eq!(si_label(100_000.0), "100k");
        assert_eq!(si_label(1e7), "10M");
        assert_eq!(si_label(1e9), "1G");
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_text(1_795_398_000), "2026-11-23T01:40:00Z");
        assert_eq!(utc_text(951_782_400), "2000-02-29T00:00:00Z");
    }
}
