package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/runtime"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemdb/pgxdriver"
)

// serveMetrics exports the OpenTelemetry metrics in Prometheus format on a
// listener of their own, so that the GraphQL port does not expose them,
// until ctx ends. The resource names the service (service.name; the
// environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win), and
// the Go runtime's metrics (OpenTelemetry's runtime instrumentation) come
// with it.
func serveMetrics(ctx context.Context, addr, service string, logger *slog.Logger) (*sdkmetric.MeterProvider, error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))
	if err := runtime.Start(runtime.WithMeterProvider(mp)); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server", slog.Any("error", err))
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	logger.Info("serving metrics", "url", "http://"+addr+"/metrics")
	return mp, nil
}

// registerPoolMetrics reports a connection pool under OpenTelemetry's
// semantic conventions for database clients: db.client.connection.count
// (state idle or used) and db.client.connection.max, with the pool's name
// (db.client.connection.pool.name), sampled at each collection.
func registerPoolMetrics(mp metric.MeterProvider, name string, drv idemdb.Driver) error {
	var stats func() (idle, used, max int64)
	if d, ok := drv.(*pgxdriver.Driver); ok {
		stats = pgxStats(d.Pool())
	} else {
		stats = sqlStats(drv.DB())
	}
	m := mp.Meter("github.com/goovo/idem/cmd/server")
	count, err := m.Int64ObservableUpDownCounter("db.client.connection.count", metric.WithUnit("{connection}"),
		metric.WithDescription("The number of connections that are currently in state described by the state attribute."))
	if err != nil {
		return err
	}
	most, err := m.Int64ObservableUpDownCounter("db.client.connection.max", metric.WithUnit("{connection}"),
		metric.WithDescription("The maximum number of open connections allowed."))
	if err != nil {
		return err
	}
	pool := attribute.String("db.client.connection.pool.name", name)
	idleAttrs := metric.WithAttributes(pool, attribute.String("db.client.connection.state", "idle"))
	usedAttrs := metric.WithAttributes(pool, attribute.String("db.client.connection.state", "used"))
	poolAttrs := metric.WithAttributes(pool)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		idle, used, max := stats()
		o.ObserveInt64(count, idle, idleAttrs)
		o.ObserveInt64(count, used, usedAttrs)
		o.ObserveInt64(most, max, poolAttrs)
		return nil
	}, count, most)
	return err
}

func pgxStats(p *pgxpool.Pool) func() (idle, used, max int64) {
	return func() (int64, int64, int64) {
		s := p.Stat()
		return int64(s.IdleConns()), int64(s.AcquiredConns()), int64(s.MaxConns())
	}
}

func sqlStats(db *sql.DB) func() (idle, used, max int64) {
	return func() (int64, int64, int64) {
		s := db.Stats()
		return int64(s.Idle), int64(s.InUse), int64(s.MaxOpenConnections)
	}
}
