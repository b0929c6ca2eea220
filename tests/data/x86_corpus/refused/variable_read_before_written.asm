    push "Cairo"
    call get_temperature
    cmp eax, 25
    jl no_record
    mov best_city, "Cairo"
no_record:
    push best_city
    call announce
