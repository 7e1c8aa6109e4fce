package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/config"
)

// adminCmd groups the maintenance commands that work on a deployment's
// store directly, beside (or without) its running daemons.
func adminCmd() *cobra.Command {
	admin := &cobra.Command{
		Use:   "admin",
		Short: "Maintenance of a deployment's store (artifact signing key)",
		Args:  cobra.NoArgs,
	}
	admin.AddCommand(rotateArtifactKeyCmd())
	return admin
}

func rotateArtifactKeyCmd() *cobra.Command {
	var (
		configPath, dataDir, storeURL string
		grace                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rotate-artifact-key",
		Short: "Replace the key that signs artifact URLs, for every node of the deployment",
		Long: `Replace the key that signs artifact URLs. The key lives in the store (SQLite in
--data-dir, or the PostgreSQL store a cluster shares), so one rotation is the
deployment's: every node signs with the new key once it has loaded it (within
a minute; at once when it meets a URL the new key signed).

The previous key keeps verifying for --grace (default ` + artifact.DefaultRotationGrace.String() + `: the longest a
signed URL lives, plus the minute nodes take to load the new key), so URLs
handed out before the rotation keep working until they expire. --grace 0
stops them: use it when a key or URLs may have leaked (daemons still honour
the old key until they reload, within a minute).

Give the same --config, --data-dir or --store the daemons run with. The
command can run while they do.`,
		Example: `  surfaced admin rotate-artifact-key --config surfaced.yaml
  surfaced admin rotate-artifact-key --data-dir ~/.local/share/surfaced --grace 0
  surfaced admin rotate-artifact-key --store postgres://surfaced@db/surfaced`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fl config.Flags
			if cmd.Flags().Changed("data-dir") {
				fl.DataDir = &dataDir
			}
			if cmd.Flags().Changed("store") {
				fl.Store = &storeURL
			}
			if grace < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--grace must not be negative, got %s", grace)}
			}
			f, err := config.Resolve(configPath, fl, os.Getenv)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return rotateArtifactKey(cmd.Context(), f, grace, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "the daemons' configuration file (its data_dir and store)")
	fs.StringVar(&dataDir, "data-dir", "", "the data directory of a SQLite store (default $SURFACED_DATA_DIR, else $XDG_DATA_HOME/surfaced)")
	fs.StringVar(&storeURL, "store", "", "a postgres:// URL: the PostgreSQL store of the deployment")
	fs.DurationVar(&grace, "grace", artifact.DefaultRotationGrace, "how long the previous key keeps verifying the URLs it signed; 0: not at all")
	return cmd
}

func rotateArtifactKey(ctx context.Context, f *config.File, grace time.Duration, out io.Writer) error {
	st, err := openStore(ctx, f)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer st.Close()
	k, err := artifact.RotateKey(ctx, st, grace)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	fmt.Fprintf(out, "surfaced: artifact signing key %d made (store %s); nodes sign with it within %s.\n", k.ID, storeName(f), artifact.KeyRefresh)
	if grace > 0 {
		fmt.Fprintf(out, "surfaced: URLs signed before keep working until %s at the latest (--grace %s).\n",
			k.Created.Add(grace).UTC().Format(time.RFC3339), grace)
	} else {
		fmt.Fprintln(out, "surfaced: URLs signed before stop working as nodes load the new key (--grace 0).")
	}
	return nil
}
