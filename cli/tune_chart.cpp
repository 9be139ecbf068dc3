#include "cli/tune_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace qforge::cli {
namespace {

constexpr double kWidth = 760, kHeight = 480;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

struct LogAxis {
  double lo, hi;    // data range (powers of ten)
  double from, to;  // pixels
  double at(double v) const {
    return from +
           (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (to - from);
  }
};

double floor_pow10(double v) {
  return std::pow(10.0, std::floor(std::log10(v)));
}
double ceil_pow10(double v) {
  return std::pow(10.0, std::ceil(std::log10(v)));
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string roofline_svg(const TuneReport& report, const MachineLimits& limits,
                         const std::string& title) {
  double x_lo = 1e30, x_hi = 0, y_lo = 1e30, y_hi = 0;
  for (const TunedMeasurement& r : report.rows) {
    const double intensity = r.operations() / double(r.weight_bytes);
    x_lo = std::min(x_lo, intensity), x_hi = std::max(x_hi, intensity);
    for (double us : {r.default_us, r.tuned_us})
      y_lo = std::min(y_lo, r.gops(us)), y_hi = std::max(y_hi, r.gops(us));
  }
  if (report.rows.empty()) x_lo = 0.1, x_hi = 100, y_lo = 1, y_hi = 100;
  if (limits.dot_gops > 0) y_hi = std::max(y_hi, limits.dot_gops);
  const LogAxis x{floor_pow10(x_lo), ceil_pow10(x_hi * 1.01), kLeft, kWidth - kRight};
  const LogAxis y{floor_pow10(y_lo), ceil_pow10(y_hi * 1.01), kHeight - kBottom, kTop};

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kWidth) +
                    "\" height=\"" + number(kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg +=
      "<text x=\"" + number(kLeft) + "\" y=\"22\" font-size=\"14\">" + escaped(title) + "</text>\n";
  // Decades: grid lines and labels.
  for (double v = x.lo; v <= x.hi * 1.001; v *= 10)
    svg += "<line x1=\"" + number(x.at(v)) + "\" y1=\"" + number(y.from) + "\" x2=\"" +
           number(x.at(v)) + "\" y2=\"" + number(y.to) + "\" stroke=\"#ddd\"/>\n<text x=\"" +
           number(x.at(v)) + "\" y=\"" + number(y.from + 16) + "\" text-anchor=\"middle\">" +
           (v < 1 ? number(v) : std::to_string(static_cast<long long>(v))) + "</text>\n";
  for (double v = y.lo; v <= y.hi * 1.001; v *= 10)
    svg += "<line x1=\"" + number(x.from) + "\" y1=\"" + number(y.at(v)) + "\" x2=\"" +
           number(x.to) + "\" y2=\"" + number(y.at(v)) + "\" stroke=\"#ddd\"/>\n<text x=\"" +
           number(x.from - 6) + "\" y=\"" + number(y.at(v) + 4) + "\" text-anchor=\"end\">" +
           (v < 1 ? number(v) : std::to_string(static_cast<long long>(v))) + "</text>\n";
  svg += "<text x=\"" + number((x.from + x.to) / 2) + "\" y=\"" + number(kHeight - 12) +
         "\" text-anchor=\"middle\">operations per weight byte (2MNK / packed bytes)</text>\n";
  svg += "<text transform=\"translate(16," + number((y.from + y.to) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">GOPS (2MNK per second)</text>\n";
  // Roof: min(bandwidth x intensity, dot peak), sampled along the x axis.
  if (limits.read_gbps > 0 || limits.dot_gops > 0) {
    std::string points;
    for (int i = 0; i <= 200; ++i) {
      const double v = x.lo * std::pow(x.hi / x.lo, i / 200.0);
      double roof = limits.read_gbps > 0 ? limits.read_gbps * v : 1e30;
      if (limits.dot_gops > 0) roof = std::min(roof, limits.dot_gops);
      roof = std::clamp(roof, y.lo, y.hi);
      points += number(x.at(v)) + "," + number(y.at(roof)) + " ";
    }
    svg +=
        "<polyline fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
  }
  // Measurements: default (hollow) -> tuned (filled).
  for (const TunedMeasurement& r : report.rows) {
    const double px = x.at(r.operations() / double(r.weight_bytes));
    const double from = y.at(r.gops(r.default_us)), to = y.at(r.gops(r.tuned_us));
    svg += "<g><title>" + kernel_name(r.key) + " M=" + std::to_string(r.m) + "</title>";
    svg += "<line x1=\"" + number(px) + "\" y1=\"" + number(from) + "\" x2=\"" + number(px) +
           "\" y2=\"" + number(to) + "\" stroke=\"#36c\"/>";
    svg += "<circle cx=\"" + number(px) + "\" cy=\"" + number(from) +
           "\" r=\"4\" fill=\"none\" stroke=\"#36c\"/>";
    svg += "<circle cx=\"" + number(px) + "\" cy=\"" + number(to) + "\" r=\"3\" fill=\"#36c\"/>";
    svg += "</g>\n";
  }
  svg += "<text x=\"" + number(x.to) + "\" y=\"" + number(kTop - 6) +
         "\" text-anchor=\"end\">red: roof (read bandwidth, dot peak); o default, &#9679; tuned"
         "</text>\n</svg>\n";
  return svg;
}

}  // namespace qforge::cli
