/* zoo/app/plot.h -- small SVG plots: line charts (loss curves), heatmap grids (attention weights,
 * like d2l's show_heatmaps) and grouped histograms (d2l's sentence-length histogram).
 * Each writes a standalone SVG file (to a temporary file renamed over path) and returns 0, or
 * -1 with ag_last_error() naming the file. */
#ifndef TG_ZOO_PLOT_H
#define TG_ZOO_PLOT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zoo_series {
    const char *label;
    const double *x, *y;
    int n;
} zoo_series;

int zoo_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const zoo_series *series, int n_series, bool log_y);

/* A grid of n_rows x n_cols heatmaps, each R x C values in [0, 1] (weights[map][r][c], maps in
 * row-major grid order), titled titles[map] (may be NULL); row_labels (R) and col_labels (C)
 * name the axes' ticks (may be NULL). One shared colour scale from 0 to the maximum value. */
int zoo_svg_heatmaps(const char *path, const char *title, int n_rows, int n_cols,
                     const char *const *titles, const float *weights, int R, int C,
                     const char *const *row_labels, const char *const *col_labels,
                     const char *xlabel, const char *ylabel);

/* Grouped bars: n_groups series of n_bins counts; bin b is labelled bin_labels[b]. */
int zoo_svg_histogram(const char *path, const char *title, const char *xlabel, const char *ylabel,
                      int n_groups, const char *const *group_labels, const double *const *counts,
                      int n_bins, const char *const *bin_labels);

#ifdef __cplusplus
}
#endif

#endif
