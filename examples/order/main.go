package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/connect"
	"github.com/abde64c9/courier/workflows"
)

const usage = `usage:
  order worker                      run the order workflows (task queue orders)
  order place --id ID [--subject S] [--destination helpdesk] [--tenant T | --endpoint E]
                                    place an order and print its outcome
Connects with Temporal's standard environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE).`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "order:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := connect.Dial(ctx, log)
	if err != nil {
		return err
	}
	defer c.Close()
	switch args[0] {
	case "worker":
		w := sdkworker.New(c, TaskQueue, sdkworker.Options{})
		w.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: "Order"})
		w.RegisterWorkflowWithOptions(OrderViaNexus, workflow.RegisterOptions{Name: "OrderViaNexus"})
		if err := w.Start(); err != nil {
			return err
		}
		fmt.Println("order worker running on task queue", TaskQueue)
		<-ctx.Done()
		w.Stop()
		return nil
	case "place":
		return place(ctx, c, args[1:])
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func place(ctx context.Context, c client.Client, args []string) error {
	fs := flag.NewFlagSet("place", flag.ContinueOnError)
	var o Order
	fs.StringVar(&o.ID, "id", "", "order id (required): one ticket per order")
	fs.StringVar(&o.Subject, "subject", "Prepare the order", "the ticket's subject")
	fs.StringVar(&o.Destination, "destination", "helpdesk", "Courier destination")
	fs.StringVar(&o.Tenant, "tenant", "acme", "tenant, in Courier's namespace")
	fs.StringVar(&o.Endpoint, "endpoint", "", "deliver through this Nexus endpoint (the endpoint decides the tenant)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.ID == "" {
		return errors.New("place: --id is required")
	}
	wf, name := "Order", "order-"+o.ID
	if o.Endpoint != "" {
		wf, o.Tenant = "OrderViaNexus", ""
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: name, TaskQueue: TaskQueue}, wf, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "order %s: workflow %s (%s); waiting (a parked delivery waits for its review)\n", o.ID, name, wf)
	var p Placed
	err = run.Get(ctx, &p)
	if res, ok := workflows.UndeliveredResult(err); ok {
		p = Placed{OrderID: o.ID, Delivery: res}
	}
	if p.Delivery.Key != "" {
		out, _ := json.MarshalIndent(p, "", "  ")
		fmt.Println(string(out))
	}
	return err
}
