"""The Volcano path: the devices Volcano wrote on the oldest pending pod (core.volcano's rules), that
pod marked taken on the API server before anything is handed out."""
