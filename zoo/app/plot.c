/* plot.c -- standalone SVG line charts, heatmap grids and grouped histograms. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_file.h"
#include "nn/base.h"

/* ---- output: a temporary file renamed over the target ---- */

typedef struct svg {
    FILE *f;
    ag_file out; /* the temporary file and its rename (autograd/ag_file.h) */
} svg;

static int svg_open(svg *s, const char *path, double w, double h) {
    s->f = ag_file_open(&s->out, path);
    if (!s->f) return -1;
    fprintf(s->f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g "
            "%g\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            w, h, w, h);
    return 0;
}

static int svg_close(svg *s) {
    fprintf(s->f, "</svg>\n");
    return ag_file_commit(&s->out);
}

/* Text with &, <, > and quotes escaped. */
static void text(svg *s, double x, double y, const char *anchor, const char *extra, const char *fmt,
                 ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s>", x, y, anchor,
            extra ? extra : "");
    for (const char *p = buf; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", s->f); break;
        case '<': fputs("&lt;", s->f); break;
        case '>': fputs("&gt;", s->f); break;
        case '"': fputs("&quot;", s->f); break;
        default: fputc(*p, s->f);
        }
    }
    fputs("</text>\n", s->f);
}

/* Roughly 5 "nice" ticks (1, 2, 5 x 10^k) covering [lo, hi]. */
static double nice_step(double lo, double hi) {
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

static const char *palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"};

/* ---- line chart ---- */

int zoo_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const zoo_series *series, int n_series, bool log_y) {
    const double W = 640, H = 400, L = 70, R = 20, T = 40, B = 50;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < series[k].n; i++) {
            double y = series[k].y[i];
            if (log_y && !(y > 0)) continue;
            x0 = fmin(x0, series[k].x[i]);
            x1 = fmax(x1, series[k].x[i]);
            y0 = fmin(y0, log_y ? log10(y) : y);
            y1 = fmax(y1, log_y ? log10(y) : y);
        }
    if (!(x0 <= x1)) return ag_error("%s: nothing to plot", path);
    if (x1 == x0) x1 = x0 + 1;
    if (log_y) {
        y0 = floor(y0);
        y1 = ceil(y1);
    }
    if (y1 == y0) y1 = y0 + 1;
    svg s;
    if (svg_open(&s, path, W, H)) return -1;
#define PX(v) (L + ((v)-x0) / (x1 - x0) * (W - L - R))
#define PY(v) (H - B - ((v)-y0) / (y1 - y0) * (H - T - B))
    text(&s, W / 2, 22, "middle", "font-size=\"15\"", "%s", title);
    text(&s, (L + W - R) / 2, H - 12, "middle", NULL, "%s", xlabel);
    text(&s, 16, (T + H - B) / 2, "middle", "transform=\"rotate(-90 16 195)\"", "%s%s", ylabel,
         log_y ? " (log scale)" : "");
    fprintf(s.f,
            "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#444\"/>\n",
            L, T, W - L - R, H - T - B);
    double xs = nice_step(x0, x1);
    for (double v = ceil(x0 / xs) * xs; v <= x1 + 1e-9; v += xs) {
        fprintf(s.f, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/>\n", PX(v),
                T, PX(v), H - B);
        text(&s, PX(v), H - B + 16, "middle", NULL, "%g", v);
    }
    double ys = log_y ? 1 : nice_step(y0, y1);
    for (double v = ceil(y0 / ys) * ys; v <= y1 + 1e-9; v += ys) {
        fprintf(s.f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L,
                PY(v), W - R, PY(v));
        text(&s, L - 6, PY(v) + 4, "end", NULL, "%g", log_y ? pow(10, v) : v);
    }
    for (int k = 0; k < n_series; k++) {
        fprintf(s.f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"",
                palette[k % 5]);
        for (int i = 0; i < series[k].n; i++) {
            double y = series[k].y[i];
            if (log_y && !(y > 0)) continue;
            fprintf(s.f, "%.1f,%.1f ", PX(series[k].x[i]), PY(log_y ? log10(y) : y));
        }
        fprintf(s.f, "\"/>\n");
        text(&s, W - R - 94, T + 16 + 16 * k, "start", NULL, "%s", series[k].label);
        fprintf(
            s.f,
            "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/>\n",
            W - R - 120.0, T + 12 + 16.0 * k, W - R - 100.0, T + 12 + 16.0 * k, palette[k % 5]);
    }
#undef PX
#undef PY
    return svg_close(&s);
}

/* ---- heatmaps ---- */

/* White to dark red (matplotlib's "Reds", approximately). */
static void heat_color(double v, char *out) {
    v = v < 0 ? 0 : v > 1 ? 1 : v;
    int r = (int)(255 - v * (255 - 103)), g = (int)(245 - v * 245), b = (int)(240 - v * (240 - 13));
    sprintf(out, "#%02x%02x%02x", r, g, b);
}

int zoo_svg_heatmaps(const char *path, const char *title, int n_rows, int n_cols,
                     const char *const *titles, const float *w, int R, int C,
                     const char *const *row_labels, const char *const *col_labels,
                     const char *xlabel, const char *ylabel) {
    if (n_rows < 1 || n_cols < 1 || R < 1 || C < 1) return ag_error("%s: empty heatmap", path);
    double cell = fmax(8, fmin(28, 240.0 / fmax(R, C)));
    double mw = cell * C, mh = cell * R, gap = 70, left = 90, top = 60;
    double W = left + n_cols * (mw + gap) + 60, H = top + n_rows * (mh + gap + 20) + 20;
    double vmax = 0;
    for (size_t i = 0; i < (size_t)n_rows * n_cols * R * C; i++) vmax = fmax(vmax, w[i]);
    if (vmax <= 0) vmax = 1;
    svg s;
    if (svg_open(&s, path, W, H)) return -1;
    text(&s, W / 2, 24, "middle", "font-size=\"15\"", "%s", title);
    char col[8];
    for (int gr = 0; gr < n_rows; gr++)
        for (int gc = 0; gc < n_cols; gc++) {
            int k = gr * n_cols + gc;
            double ox = left + gc * (mw + gap), oy = top + gr * (mh + gap + 20);
            if (titles && titles[k]) text(&s, ox + mw / 2, oy - 8, "middle", NULL, "%s", titles[k]);
            const float *m = w + (size_t)k * R * C;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) {
                    heat_color(m[(size_t)r * C + c] / vmax, col);
                    fprintf(
                        s.f,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                        "<title>%.4f</title></rect>\n",
                        ox + c * cell, oy + r * cell, cell, cell, col, m[(size_t)r * C + c]);
                }
            fprintf(s.f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                    "stroke=\"#444\"/>\n",
                    ox, oy, mw, mh);
            for (int r = 0; r < R && row_labels && gc == 0; r++)
                text(&s, ox - 4, oy + (r + 0.7) * cell, "end", "font-size=\"10\"", "%s",
                     row_labels[r]);
            for (int c = 0; c < C && col_labels && gr == n_rows - 1; c++) {
                double x = ox + (c + 0.6) * cell, y = oy + mh + 4;
                char rot[64];
                snprintf(rot, sizeof rot, "font-size=\"10\" transform=\"rotate(60 %.1f %.1f)\"", x,
                         y);
                text(&s, x, y, "start", rot, "%s", col_labels[c]);
            }
        }
    text(&s, left + n_cols * (mw + gap) / 2, H - 6, "middle", NULL, "%s", xlabel);
    char rot[64];
    snprintf(rot, sizeof rot, "transform=\"rotate(-90 14 %.1f)\"", H / 2);
    text(&s, 14, H / 2, "middle", rot, "%s", ylabel);
    /* colour bar */
    double bx = W - 40, by = top, bh = fmax(mh, 100);
    for (int i = 0; i < 50; i++) {
        heat_color(1 - i / 49.0, col);
        fprintf(s.f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"%.2f\" fill=\"%s\"/>\n", bx,
                by + i * bh / 50, bh / 50 + 0.5, col);
    }
    text(&s, bx + 6, by - 4, "middle", "font-size=\"10\"", "%.2f", vmax);
    text(&s, bx + 6, by + bh + 12, "middle", "font-size=\"10\"", "0");
    return svg_close(&s);
}

/* ---- histogram ---- */

int zoo_svg_histogram(const char *path, const char *title, const char *xlabel, const char *ylabel,
                      int n_groups, const char *const *group_labels, const double *const *counts,
                      int n_bins, const char *const *bin_labels) {
    const double W = 640, H = 400, L = 70, R = 20, T = 40, B = 60;
    double ymax = 0;
    for (int g = 0; g < n_groups; g++)
        for (int b = 0; b < n_bins; b++) ymax = fmax(ymax, counts[g][b]);
    if (n_bins < 1 || ymax <= 0) return ag_error("%s: nothing to plot", path);
    double ys = nice_step(0, ymax);
    ymax = ceil(ymax / ys) * ys;
    svg s;
    if (svg_open(&s, path, W, H)) return -1;
    text(&s, W / 2, 22, "middle", "font-size=\"15\"", "%s", title);
    text(&s, (L + W - R) / 2, H - 10, "middle", NULL, "%s", xlabel);
    text(&s, 16, (T + H - B) / 2, "middle", "transform=\"rotate(-90 16 190)\"", "%s", ylabel);
    for (double v = 0; v <= ymax + 1e-9; v += ys) {
        double y = H - B - v / ymax * (H - T - B);
        fprintf(s.f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y,
                W - R, y);
        text(&s, L - 6, y + 4, "end", NULL, "%g", v);
    }
    double slot = (W - L - R) / n_bins, bw = slot * 0.8 / n_groups;
    for (int b = 0; b < n_bins; b++) {
        for (int g = 0; g < n_groups; g++) {
            double h = counts[g][b] / ymax * (H - T - B);
            fprintf(s.f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s/>\n",
                    L + b * slot + slot * 0.1 + g * bw, H - B - h, bw, h, palette[g % 5],
                    g % 2 ? " fill-opacity=\"0.85\" stroke=\"#333\" stroke-width=\"0.5\"" : "");
        }
        if (bin_labels && (n_bins <= 25 || b % (n_bins / 20 + 1) == 0))
            text(&s, L + (b + 0.5) * slot, H - B + 16, "middle", "font-size=\"10\"", "%s",
                 bin_labels[b]);
    }
    for (int g = 0; g < n_groups; g++) {
        fprintf(s.f, "<rect x=\"%g\" y=\"%g\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
                W - R - 130, T + 8 + 18.0 * g, palette[g % 5]);
        text(&s, W - R - 112, T + 18 + 18.0 * g, "start", NULL, "%s", group_labels[g]);
    }
    fprintf(s.f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>\n", L, H - B,
            W - R, H - B);
    return svg_close(&s);
}
