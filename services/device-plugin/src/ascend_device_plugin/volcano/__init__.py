"""The Volcano path: the devices Volcano wrote on the oldest pending pod (annotations: the rules),
that pod marked taken on the API server before anything is handed out (volcano_path, pods)."""
