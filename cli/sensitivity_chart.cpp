#include "cli/sensitivity_chart.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace qforge::cli {
namespace {

const char* kind_colour(const std::string& kind) {
  static const std::map<std::string, const char*> colours = {{"attn_qkv", "#4878d0"},
                                                             {"attn_output", "#6acc64"},
                                                             {"ffn_gate_up", "#ee854a"},
                                                             {"ffn_down", "#d65f5f"},
                                                             {"output", "#956cb4"}};
  const auto it = colours.find(kind);
  return it == colours.end() ? "#888888" : it->second;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else
      out += ch;
  }
  return out;
}

}  // namespace

std::string sensitivity_svg(const QuantReport& report, const std::string& title) {
  const int bars = static_cast<int>(report.layers.size());
  const double bar_w = 14, gap = 4, left = 70, top = 40, plot_h = 300, bottom = 120;
  const double width = left + bars * (bar_w + gap) + 160, height = top + plot_h + bottom;
  double top_kld = 0;
  for (const LayerQuantReport& l : report.layers) top_kld = std::max(top_kld, l.sensitivity_kld);
  if (top_kld <= 0) top_kld = 1;
  std::string svg;
  char line[512];
  std::snprintf(line, sizeof line,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\" font-size=\"11\">\n",
                width, height);
  svg += line;
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::snprintf(line, sizeof line, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s</text>\n", left,
                escape(title).c_str());
  svg += line;
  // Axis and ticks at quarters of the largest KLD.
  for (int t = 0; t <= 4; ++t) {
    const double y = top + plot_h - plot_h * t / 4;
    std::snprintf(line, sizeof line,
                  "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.4f</text>\n",
                  left, y, left + bars * (bar_w + gap), y, left - 4, y + 4, top_kld * t / 4);
    svg += line;
  }
  std::snprintf(line, sizeof line,
                "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\">mean KLD, only "
                "this layer quantized</text>\n",
                top + plot_h / 2 + 60, top + plot_h / 2 + 60);
  svg += line;
  for (int i = 0; i < bars; ++i) {
    const LayerQuantReport& l = report.layers[static_cast<std::size_t>(i)];
    const double h = plot_h * l.sensitivity_kld / top_kld;
    const double x = left + i * (bar_w + gap);
    std::snprintf(line, sizeof line,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"%s\">"
                  "<title>%s %s: KLD %.5f</title></rect>\n",
                  x, top + plot_h - h, bar_w, h, kind_colour(l.kind), escape(l.name).c_str(),
                  escape(l.scheme).c_str(), l.sensitivity_kld);
    svg += line;
    std::snprintf(line, sizeof line,
                  "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(60 %.1f %.1f)\">%s</text>\n",
                  x + 3, top + plot_h + 10, x + 3, top + plot_h + 10, escape(l.name).c_str());
    svg += line;
  }
  int row = 0;
  for (const char* kind : {"attn_qkv", "attn_output", "ffn_gate_up", "ffn_down", "output"}) {
    const double x = left + bars * (bar_w + gap) + 20, y = top + 16.0 * row++;
    std::snprintf(line, sizeof line,
                  "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                  "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                  x, y, kind_colour(kind), x + 14, y + 9, kind);
    svg += line;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace qforge::cli
