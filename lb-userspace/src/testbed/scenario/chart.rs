//! A scenario's report as a picture: `--json FILE` writes `FILE` with
//! `.svg` beside it. Read from the report's JSON, so every scenario whose
//! rows carry these fields gets them: per row the share of what was sent
//! that was lost, the completion against the ideal, the spines' shares of
//! the traffic, and the slowed spine's share over time (`fabric-herd`'s
//! windows). Hand-written SVG: a few rectangles and lines need no crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

const WIDTH: f64 = 820.0;
/// Where bars and plots start, after the rows' labels.
const LEFT: f64 = 320.0;
const ROW: f64 = 20.0;
const PLOT_HEIGHT: f64 = 180.0;
/// Fills for the spines' shares and the rows' lines, in turn.
const COLOURS: [&str; 8] = [
    "#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#000000",
];

/// Writes the chart of `report` beside `json`; `None` when the report
/// has nothing to draw.
pub fn write_beside(json: &Path, report: &Value) -> Result<Option<PathBuf>> {
    let Some(svg) = svg(report) else {
        return Ok(None);
    };
    let path = json.with_extension("svg");
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(path))
}

/// The chart of `report` (`{"scenario", "modes": [ROW, ...]}`).
pub fn svg(report: &Value) -> Option<String> {
    let rows = report["modes"].as_array().filter(|r| !r.is_empty())?;
    let labels: Vec<String> = rows.iter().map(label).collect();
    let mut out = String::new();
    let mut y = 30.0;
    let lost: Vec<Option<f64>> = rows.iter().map(lost_share).collect();
    let lost_title = "lost, of what was sent";
    y = bars(&mut out, y, lost_title, &labels, &lost, 0.0, percent);
    let completion: Vec<Option<f64>> = rows
        .iter()
        .map(|r| Some(r["completion_ms"].as_f64()? / r["ideal_ms"].as_f64()?))
        .collect();
    let ratio = |v: f64| format!("{v:.2}");
    let completion_title = "completion / ideal (bars from 1)";
    y = bars(
        &mut out,
        y,
        completion_title,
        &labels,
        &completion,
        1.0,
        ratio,
    );
    let shares: Vec<Option<Vec<f64>>> = rows.iter().map(spine_shares).collect();
    y = stacked(&mut out, y, &labels, &shares);
    y = over_time(&mut out, y, &labels, rows);
    y = flap_timelines(&mut out, y, &labels, rows);
    let scenario = escape(report["scenario"].as_str().unwrap_or("scenario"));
    Some(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{y}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"10\" y=\"18\" font-size=\"15\">{scenario}</text>\n{out}</svg>\n"
    ))
}

/// A row's name: its mode and whatever tells it from the others.
fn label(row: &Value) -> String {
    let mut parts = Vec::new();
    let blind = row["telemetry"] == Value::Bool(false);
    // How a blind row chooses is not its telemetry's: said once, "blind".
    let keys: &[&str] = match blind {
        true => &["pattern", "degraded", "mode"],
        false => &["pattern", "degraded", "mode", "source", "choice"],
    };
    for key in keys {
        if let Some(text) = row[key].as_str().filter(|t| !t.is_empty()) {
            parts.push(text.to_owned());
        }
    }
    if blind {
        parts.push("blind".to_owned());
    }
    if let Some(leaves) = row["steering_leaves"].as_u64().filter(|&l| l > 0) {
        parts.push(format!("{leaves} steering"));
    }
    if let Some(load) = row["load"].as_f64() {
        parts.push(format!("{:.0}%", load * 100.0));
    }
    escape(&parts.join(" "))
}

/// What was lost (`dropped`, else `lost`) over what was `sent`.
fn lost_share(row: &Value) -> Option<f64> {
    let lost = row["dropped"].as_f64().or(row["lost"].as_f64())?;
    let sent = row["sent"].as_f64().filter(|&s| s > 0.0)?;
    Some(lost / sent)
}

fn spine_shares(row: &Value) -> Option<Vec<f64>> {
    (row["spine_share"].as_array()?.iter())
        .map(Value::as_f64)
        .collect::<Option<Vec<f64>>>()
        .filter(|s| !s.is_empty())
}

fn percent(value: f64) -> String {
    format!("{:.2}%", value * 100.0)
}

/// A panel headed `title`, a line a row with its label, the row's own
/// drawing by `draw` (given the line's top). Returns where the next
/// panel starts.
fn panel(
    out: &mut String,
    top: f64,
    title: &str,
    labels: &[String],
    mut draw: impl FnMut(&mut String, usize, f64),
) -> f64 {
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{}\" font-size=\"13\">{title}</text>",
        top + 14.0
    );
    for (i, label) in labels.iter().enumerate() {
        let y = top + 22.0 + ROW * i as f64;
        let _ = writeln!(out, "<text x=\"10\" y=\"{}\">{label}</text>", y + 13.0);
        draw(out, i, y);
    }
    top + 30.0 + ROW * labels.len() as f64
}

/// A panel of one bar a row from `base`, scaled to the largest; nothing
/// when no row has a value.
fn bars(
    out: &mut String,
    top: f64,
    title: &str,
    labels: &[String],
    values: &[Option<f64>],
    base: f64,
    text: impl Fn(f64) -> String,
) -> f64 {
    if values.iter().all(Option::is_none) {
        return top;
    }
    let largest = (values.iter().flatten())
        .map(|v| v - base)
        .fold(0.0, f64::max);
    let room = WIDTH - LEFT - 80.0;
    panel(out, top, title, labels, |out, i, y| {
        let Some(value) = values[i] else {
            return;
        };
        let length = match largest > 0.0 {
            true => (value - base).max(0.0) / largest * room,
            false => 0.0,
        };
        let _ = writeln!(
            out,
            "<rect x=\"{LEFT}\" y=\"{y}\" width=\"{length:.1}\" height=\"15\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{}\">{}</text>",
            COLOURS[0],
            LEFT + length + 4.0,
            y + 12.0,
            text(value)
        );
    })
}

/// Each row's spines' shares as one bar split in turn.
fn stacked(out: &mut String, top: f64, labels: &[String], shares: &[Option<Vec<f64>>]) -> f64 {
    if shares.iter().all(Option::is_none) {
        return top;
    }
    let room = WIDTH - LEFT - 20.0;
    let title = "each spine's share of the traffic, spine 1 first";
    panel(out, top, title, labels, |out, i, y| {
        let mut x = LEFT;
        for (j, share) in shares[i].iter().flatten().enumerate() {
            let width = share * room;
            let _ = writeln!(
                out,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{width:.1}\" height=\"15\" fill=\"{}\"/>",
                COLOURS[j % COLOURS.len()]
            );
            x += width;
        }
    })
}

/// The slowed spine's share in each window, a line a row, over the
/// run's time (0 at the change).
fn over_time(out: &mut String, top: f64, labels: &[String], rows: &[Value]) -> f64 {
    let series: Vec<(String, Vec<(f64, f64)>)> = (labels.iter().zip(rows))
        .map(|(label, row)| {
            let points = (row["windows"].as_array().into_iter().flatten())
                .filter_map(|w| Some((w["at_ms"].as_f64()?, w["slow_share"].as_f64()?)))
                .collect();
            (label.clone(), points)
        })
        .collect();
    let highest = (series.iter().flat_map(|(_, p)| p))
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(0.01);
    let title = |first: f64, last: f64| {
        format!(
            "the slowed spine's share per window, {first:.0} to {last:.0} ms from the change \
             (0 to {:.0}%)",
            highest * 100.0
        )
    };
    line_plot(out, top, title, &series, &[0.0])
}

/// Each spine's packets per window around a flap, a plot per row that
/// has them, dashed lines where the link went down and came back.
fn flap_timelines(out: &mut String, mut top: f64, labels: &[String], rows: &[Value]) -> f64 {
    for (label, row) in labels.iter().zip(rows) {
        let timeline = &row["timeline"];
        let (Some(at), Some(spines), Some(up)) = (
            timeline["at_ms"].as_array(),
            timeline["spine_packets"].as_array(),
            timeline["up_ms"].as_f64(),
        ) else {
            continue;
        };
        let window = timeline["window_ms"].as_f64().unwrap_or(0.0);
        let series: Vec<(String, Vec<(f64, f64)>)> = (spines.iter().enumerate())
            .map(|(j, packets)| {
                let points = (at.iter().zip(packets.as_array().into_iter().flatten()))
                    .filter_map(|(t, p)| Some((t.as_f64()?, p.as_f64()?)))
                    .collect();
                (format!("s{}", j + 1), points)
            })
            .collect();
        let title = |first: f64, last: f64| {
            format!(
                "{label}: each spine's packets per {window:.0} ms, {first:.0} to {last:.0} ms \
                 from the link going down (dashed: down at 0, up at {up:.0})"
            )
        };
        top = line_plot(out, top, title, &series, &[0.0, up]);
    }
    top
}

/// A plot of `series`, a line each with its label below, over their
/// common time axis, dashed verticals at `markers`, headed by `title`
/// given the axis' ends; nothing when no series has a point.
fn line_plot(
    out: &mut String,
    top: f64,
    title: impl Fn(f64, f64) -> String,
    series: &[(String, Vec<(f64, f64)>)],
    markers: &[f64],
) -> f64 {
    let points = series.iter().flat_map(|(_, p)| p);
    let (Some(first), Some(last)) = (
        points.clone().map(|p| p.0).reduce(f64::min),
        points.clone().map(|p| p.0).reduce(f64::max),
    ) else {
        return top;
    };
    let highest = points.map(|p| p.1).fold(0.0, f64::max);
    let highest = if highest > 0.0 { highest } else { 1.0 };
    let (left, width) = (60.0, WIDTH - 80.0);
    let (plot_top, bottom) = (top + 24.0, top + 24.0 + PLOT_HEIGHT);
    let x = |t: f64| left + (t - first) / (last - first).max(1.0) * width;
    let y = |v: f64| bottom - v / highest * PLOT_HEIGHT;
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{}\" font-size=\"13\">{}</text>\n\
         <rect x=\"{left}\" y=\"{plot_top}\" width=\"{width}\" height=\"{PLOT_HEIGHT}\" \
         fill=\"none\" stroke=\"#999999\"/>",
        top + 14.0,
        escape(&title(first, last)),
    );
    for &at in markers.iter().filter(|&&t| (first..=last).contains(&t)) {
        let _ = writeln!(
            out,
            "<line x1=\"{:.1}\" y1=\"{plot_top}\" x2=\"{:.1}\" y2=\"{bottom}\" \
             stroke=\"#999999\" stroke-dasharray=\"4\"/>",
            x(at),
            x(at)
        );
    }
    let mut legend = bottom + 18.0;
    for (i, (label, points)) in series.iter().enumerate() {
        if points.is_empty() {
            continue;
        }
        let colour = COLOURS[i % COLOURS.len()];
        let line: Vec<String> = points
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\"/>\n\
             <text x=\"{left}\" y=\"{legend}\" fill=\"{colour}\">{}</text>",
            line.join(" "),
            escape(label)
        );
        legend += ROW;
    }
    legend + 10.0
}

/// Text safe inside an SVG element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Value {
        serde_json::json!({
            "scenario": "fabric-herd",
            "modes": [
                {"mode": "ecmp", "telemetry": false, "sent": 1000, "dropped": 140,
                 "completion_ms": 1200.0, "ideal_ms": 1000.0,
                 "spine_share": [0.5, 0.25, 0.25],
                 "windows": [{"at_ms": -10.0, "slow_share": 0.3}, {"at_ms": 10.0, "slow_share": 0.3}]},
                {"mode": "flowlet", "telemetry": true, "source": "counters-db",
                 "choice": "weighted", "steering_leaves": 4, "sent": 1000, "dropped": 7,
                 "completion_ms": 1010.0, "ideal_ms": 1000.0,
                 "windows": [{"at_ms": -10.0, "slow_share": 0.3}, {"at_ms": 10.0, "slow_share": 0.075}]}
            ]
        })
    }

    #[test]
    fn each_row_gets_its_loss_completion_shares_and_share_over_time() {
        let svg = svg(&report()).expect("a chart");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
        for text in [
            ">fabric-herd</text>",
            ">ecmp blind</text>",
            ">flowlet counters-db weighted 4 steering</text>",
            ">14.00%</text>",
            ">0.70%</text>",
            ">1.20</text>",
            ">1.01</text>",
        ] {
            assert!(svg.contains(text), "{text} in\n{svg}");
        }
        // Two bar panels of two rows, one stacked row of three spines.
        assert_eq!(svg.matches("<rect").count(), 2 + 2 + 3 + 1);
        // Every bar and the plot within the picture.
        for rect in svg.split("<rect x=\"").skip(1) {
            let number = |key: &str| -> f64 {
                let at = rect.find(key).expect(key) + key.len();
                rect[at..rect[at..].find('"').expect("end") + at]
                    .parse()
                    .expect("a number")
            };
            let (x, width) = (
                rect[..rect.find('"').expect("x")].parse::<f64>(),
                number(" width=\""),
            );
            assert!(x.expect("x") + width <= WIDTH, "{rect}");
        }
        // A line a row; the steering row's falls from 30% to 7.5%: a
        // quarter of the way up the plot from the bottom, as it started at
        // the top.
        let lines: Vec<Vec<(f64, f64)>> = (svg.split("<polyline points=\"").skip(1))
            .map(|rest| {
                (rest[..rest.find('"').expect("end")].split(' '))
                    .map(|p| {
                        let (x, y) = p.split_once(',').expect("x,y");
                        (x.parse().expect("x"), y.parse().expect("y"))
                    })
                    .collect()
            })
            .collect();
        assert_eq!(lines.len(), 2, "{svg}");
        let [(_, top), (_, fallen)] = lines[1][..] else {
            panic!("two points: {lines:?}")
        };
        assert_eq!(lines[0][0].1, top, "both start at the highest share");
        assert!((fallen - top - PLOT_HEIGHT * 0.75).abs() < 0.1, "{lines:?}");
    }

    /// A flap's timeline: a line a spine, dashed where the link went down
    /// and came back, the dead spine's line at the bottom between them.
    #[test]
    fn a_flap_draws_each_spines_packets_with_down_and_up_marked() {
        let svg = svg(&serde_json::json!({
            "scenario": "link-down",
            "modes": [{"mode": "ecmp", "telemetry": false, "sent": 100, "dropped": 0,
                "timeline": {"window_ms": 10.0, "at_ms": [-20.0, -10.0, 0.0, 10.0, 20.0],
                    "up_ms": 15.0,
                    "spine_packets": [[10, 10, 15, 15, 10], [10, 10, 0, 0, 10]]}}]
        }))
        .expect("a chart");
        assert!(
            svg.contains(
                ">ecmp blind: each spine's packets per 10 ms, -20 to 20 ms from the link going \
                 down (dashed: down at 0, up at 15)</text>"
            ),
            "{svg}"
        );
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert_eq!(svg.matches("stroke-dasharray").count(), 2, "{svg}");
        assert!(
            svg.contains(">s1</text>") && svg.contains(">s2</text>"),
            "{svg}"
        );
        let dead = svg.split("<polyline points=\"").nth(2).expect("s2's line");
        let ys: Vec<f64> = (dead[..dead.find('"').expect("end")].split(' '))
            .map(|p| p.split_once(',').expect("x,y").1.parse().expect("y"))
            .collect();
        assert_eq!(ys[2], ys[3], "{ys:?}");
        assert!(ys[2] > ys[0], "down is lower on the picture: {ys:?}");
    }

    #[test]
    fn a_report_without_rows_has_no_chart_and_missing_fields_no_panel() {
        assert_eq!(
            svg(&serde_json::json!({"scenario": "x", "modes": []})),
            None
        );
        let svg = svg(&serde_json::json!({
            "scenario": "restart", "modes": [{"mode": "ecmp", "sent": 10, "lost": 0}]
        }))
        .expect("a chart");
        assert!(svg.contains(">0.00%</text>"), "{svg}");
        assert!(!svg.contains("completion"), "{svg}");
        assert!(!svg.contains("polyline"), "{svg}");
    }
}
